# Expert parallelism: the expert_toy test model (tests/plugins/expert_toy) with experts sharded
# over ep and replicated over edp, the variable all-to-all, expert gradients and their norm, and
# whole runs at (dp4, ep2), (dp4, ep2, ZeRO-1) and (dp2, ep2, pp2) against the single-rank run
# (losses, gradient norms, final parameters within 1e-5); checkpoints that store each expert once
# and resume at another ep. Label: expert_parallel (the runs also carry parity / checkpoint).
triax_add_plugin(test_plugin_expert_toy SOURCES ${CMAKE_CURRENT_LIST_DIR}/plugins/expert_toy/expert_toy_model.cpp)
set_target_properties(test_plugin_expert_toy PROPERTIES OUTPUT_NAME expert_toy
                      LIBRARY_OUTPUT_DIRECTORY "${TRIAX_TEST_PLUGINS_DIR}/expert_toy")

target_sources(multi_rank_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/expert_parallel_test.cpp)
triax_add_multi_rank_suites(NAME expert_parallel_4_ranks RANKS 4 SUITES AllToAllV ExpertGradients ReplicaOwnership
                            TIMEOUT 60)
set_tests_properties(expert_parallel_4_ranks PROPERTIES LABELS "multi_rank;expert_parallel")

set(EXPERT_CONFIG ${CMAKE_CURRENT_LIST_DIR}/parity/expert_toy_parity.yaml)
set(EXPERT_DIR ${CMAKE_CURRENT_BINARY_DIR}/expert_parallel)
set(EXPERT_PLUGINS --set "plugins.paths=[${TRIAX_TEST_PLUGINS_DIR}/expert_toy]")
add_dependencies(parity_runner test_plugin_expert_toy)

add_test(NAME expert_parallel.reference
         COMMAND parity_runner run --config ${EXPERT_CONFIG} --out ${EXPERT_DIR}/reference
                 --set checkpoints.checkpoints_path=${EXPERT_DIR}/reference/run ${EXPERT_PLUGINS})
set_tests_properties(expert_parallel.reference PROPERTIES FIXTURES_SETUP expert_reference
                     LABELS "parity;expert_parallel" ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 60)

# The run's metrics.jsonl names both auxiliary losses on every step.
add_test(NAME expert_parallel.aux_loss_metrics
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/parity/check_aux_metrics.sh ${EXPERT_DIR}/reference/run)
set_tests_properties(expert_parallel.aux_loss_metrics PROPERTIES FIXTURES_REQUIRED expert_reference
                     LABELS "expert_parallel")

# triax_expert_case(<name> RANKS n [--set ...]...): trains at that topology and compares.
function(triax_expert_case name)
  cmake_parse_arguments(ARG "" "RANKS;SAVES" "" ${ARGN})
  add_test(NAME expert_parallel.${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/parity/run_case.sh $<TARGET_FILE:parity_runner> ${MPIEXEC_EXECUTABLE}
                   ${EXPERT_CONFIG} ${EXPERT_DIR}/reference ${EXPERT_DIR}/${name} ${ARG_RANKS} ${EXPERT_PLUGINS}
                   ${ARG_UNPARSED_ARGUMENTS})
  set_tests_properties(expert_parallel.${name} PROPERTIES FIXTURES_REQUIRED expert_reference
                       LABELS "parity;multi_rank;expert_parallel" PROCESSORS ${ARG_RANKS} TIMEOUT 120)
  if(ARG_SAVES)
    set_tests_properties(expert_parallel.${name} PROPERTIES FIXTURES_SETUP expert_source_${name})
  endif()
endfunction()

set(EXPERT_DP4_EP2 --set parallelism.dp=4 --set parallelism.expert_parallel_size=2
    --set tokens.batch_accumulation_per_replica=2)
triax_expert_case(dp4_ep2 RANKS 4 SAVES 1 ${EXPERT_DP4_EP2} --set checkpoints.checkpoint_interval=4)
triax_expert_case(dp4_ep2_zero1 RANKS 4 ${EXPERT_DP4_EP2} --set optimizer.zero_stage=1)
triax_expert_case(dp2_ep2_pp2 RANKS 4 --set parallelism.dp=2 --set parallelism.expert_parallel_size=2
                  --set parallelism.pp=2 --set parallelism.pp_engine=1f1b --set tokens.batch_accumulation_per_replica=4)

# The (dp4, ep2) checkpoint of step 4: each expert shard stored by exactly one rank file; resumed
# at ep 1 (one rank) and at ep 4 (dp 4), both end within 1e-5 of the uninterrupted run.
add_test(NAME expert_parallel.checkpoint_stores_each_expert_once
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/parity/check_expert_shards.sh $<TARGET_FILE:triax>
                 ${EXPERT_DIR}/dp4_ep2/run/step_00000004)
set_tests_properties(expert_parallel.checkpoint_stores_each_expert_once PROPERTIES
                     FIXTURES_REQUIRED expert_source_dp4_ep2 LABELS "checkpoint;expert_parallel")
function(triax_expert_resume name)
  cmake_parse_arguments(ARG "" "RANKS" "" ${ARGN})
  add_test(NAME expert_parallel.resume_${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint/resume_case.sh $<TARGET_FILE:parity_runner>
                   ${MPIEXEC_EXECUTABLE} ${EXPERT_CONFIG} ${EXPERT_DIR}/reference ${EXPERT_DIR}/dp4_ep2
                   ${EXPERT_DIR}/resume_${name} ${ARG_RANKS} 4 ${EXPERT_PLUGINS} ${ARG_UNPARSED_ARGUMENTS})
  set_tests_properties(expert_parallel.resume_${name} PROPERTIES
                       FIXTURES_REQUIRED "expert_reference;expert_source_dp4_ep2"
                       LABELS "checkpoint;multi_rank;expert_parallel" PROCESSORS ${ARG_RANKS} TIMEOUT 120)
endfunction()
triax_expert_resume(ep1 RANKS 1)
triax_expert_resume(ep4 RANKS 4 --set parallelism.dp=4 --set parallelism.expert_parallel_size=4
                    --set tokens.batch_accumulation_per_replica=2)
