# The longest tests' seconds (the whole suite at -j2 on two cores), as ctest's COST: a build with
# no timings of its own yet (a fresh clone) starts them first instead of in the order declared,
# where the two longest came last and ran with the other core idle. Once ctest has timed a run
# (Testing/Temporary/CTestCostData.txt) its own measurements take over. Only the order counts:
# refresh a value when a test's time changes by much.
set(triax_test_costs
  faults.corrupt_inputs 45
  mup.transfer 36
  gpt2.build 35  # the setup of the gpt2 tests: started early, it frees them early too
  faults.soak 30
  hf_convert_round_trips 30
  checkpoint.crash_safety.rank_files 25
  checkpoint.crash_safety.async 25
  faults.preemption.signals 25
  launch 22
  qwen2.hf_logits_match_transformers 22
  out_of_tree_plugin 20
  checkpoint.crash_safety.commit 20
  qwen3.tiny_configs_train 20
  interop_hf_llama_compat 18
  qwen3.hf_logits_match_transformers 17
  hf_mamba2_logits_match_transformers 13
  generate_matches_transformers 13
  moe.hf_sliding_window_matches_transformers 13
  faults.rank_death.forward 13
  faults.rank_death.backward 13
  faults.rank_death.optimizer_step 13
  faults.rank_death.mid_rank_file 13
  faults.config_cli 12
  faults.preemption.pp_and_second_signal 10)
while(triax_test_costs)
  list(POP_FRONT triax_test_costs test cost)
  set_tests_properties(${test} PROPERTIES COST ${cost})
endwhile()

# The GoogleTest suites' entries exist only once their programs are built and listed
# (gtest_suites.cmake), so their costs are set when ctest reads the entries: from a file read after
# the suites' own (this file is included last). Measured 139, 121 and 76 s on a machine at load 15
# to 19, where a bare test program took 2.5 s to start against 0.5 s unloaded: the values are those
# divided by 5.
set(triax_suite_costs
  config_fuzz_test.ShippedConfigs/ConfigFuzz 28
  zero_bubble_schedule_test.ZeroBubbleSchedule 15)
set(triax_suite_costs_text "")
while(triax_suite_costs)
  list(POP_FRONT triax_suite_costs test cost)
  string(APPEND triax_suite_costs_text "set_tests_properties([==[${test}]==] PROPERTIES COST ${cost})\n")
endwhile()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/suite_costs.cmake "${triax_suite_costs_text}")
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${CMAKE_CURRENT_BINARY_DIR}/suite_costs.cmake)
