# The longest tests' seconds (the whole suite at -j2 on two idle cores, a fresh clone), as ctest's
# COST: a build with no timings of its own yet (a fresh clone) starts them first instead of in the
# order declared, where the two longest came last and ran with the other core idle. Once ctest has
# timed a run (Testing/Temporary/CTestCostData.txt) its own measurements take over. Only the order
# counts: refresh a value when a test's time changes by much.
set(triax_test_costs
  ops_readme_commands 58  # no longer serial: started first, it runs beside the others
  faults.soak 24
  faults.corrupt_inputs 22
  checkpoint.crash_safety.async 21
  gpt2.build 19  # the setup of the gpt2 tests: started early, it frees them early too
  checkpoint.crash_safety.rank_files 19
  mup.transfer 19
  faults.preemption.signals 17
  checkpoint.crash_safety.commit 16
  hf_convert_round_trips 15
  launch 15
  faults.rank_death.mid_rank_file 13
  ops_slurm_launch 13
  faults.rank_death.forward 13
  faults.rank_death.optimizer_step 13
  faults.rank_death.backward 13
  qwen3.tiny_configs_train 12
  out_of_tree_plugin 11
  communicator_4_ranks 11
  qwen2.hf_logits_match_transformers 10
  qwen3.hf_logits_match_transformers 10
  faults.config_cli 9
  muon.reaches_adamw_loss_in_fewer_steps 9
  communicator_timeout_2_ranks 9
  interop_hf_llama_compat 8
  faults.preemption.pp_and_second_signal 8
  faults.preemption.async_write_in_flight 8)
while(triax_test_costs)
  list(POP_FRONT triax_test_costs test cost)
  set_tests_properties(${test} PROPERTIES COST ${cost})
endwhile()

# The GoogleTest suites' entries exist only once their programs are built and listed
# (gtest_suites.cmake), so their costs are set when ctest reads the entries: from a file read after
# the suites' own (this file is included last). Measured in the same run as the list above.
set(triax_suite_costs
  config_fuzz_test.ShippedConfigs/ConfigFuzz 11
  zero_bubble_schedule_test.ZeroBubbleSchedule 9)
set(triax_suite_costs_text "")
while(triax_suite_costs)
  list(POP_FRONT triax_suite_costs test cost)
  string(APPEND triax_suite_costs_text "set_tests_properties([==[${test}]==] PROPERTIES COST ${cost})\n")
endwhile()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/suite_costs.cmake "${triax_suite_costs_text}")
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${CMAKE_CURRENT_BINARY_DIR}/suite_costs.cmake)
