# Zero-bubble pipeline schedules (docs/pipeline-schedules.md): the schedules as data and the
# schedule simulator (plain C++), the backward split into B and W in the SDK's layers against the
# whole backward, the engines zb_h1 and zb_v over real ranks (PipelineStage, a V's hand-overs in
# memory, a W never run), their refusals before step 1, the parity runs against the single rank
# (parity.cmake, moe.cmake) and `triax inspect schedule`. Label: zero_bubble.
add_executable(zero_bubble_schedule_test ${CMAKE_CURRENT_LIST_DIR}/zero_bubble_schedule_test.cpp)
target_link_libraries(zero_bubble_schedule_test PRIVATE triax_pipeline_schedules GTest::gtest_main)
triax_discover_test_suites(zero_bubble_schedule_test PROPERTIES LABELS zero_bubble)

# The simulator fed per rank and chunk, as from a run's record of its passes.
add_executable(schedule_simulator_test ${CMAKE_CURRENT_LIST_DIR}/schedule_simulator_test.cpp)
target_link_libraries(schedule_simulator_test PRIVATE triax_pipeline_schedules GTest::gtest_main)
triax_discover_test_suites(schedule_simulator_test PROPERTIES LABELS zero_bubble)

target_sources(sdk_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/deferred_weight_gradients_test.cpp)  # tests/sdk_test.cmake
triax_add_area_suites(sdk_test SUITES DeferredWeightGradients.* PROPERTIES LABELS zero_bubble)

target_sources(multi_rank_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/zero_bubble_pipeline_test.cpp)
target_link_libraries(multi_rank_test PRIVATE triax_pipeline_schedules)
add_dependencies(multi_rank_test triax_zb_h1 triax_zb_v)
triax_add_multi_rank_suites(NAME zero_bubble_pipeline_2_ranks RANKS 2 SUITES ZeroBubblePipeline)
set_property(TEST zero_bubble_pipeline_2_ranks APPEND PROPERTY LABELS zero_bubble)

# The refusals before step 1, from whole runs of the parity model at pp 2 (model_chunks.cmake).
triax_chunk_refusal(zb_v_with_too_few_blocks
  "parallelism.pp_engine: engine 'zb_v' places 2 model chunks on each of parallelism.pp = 2 pipeline ranks make 4 virtual stages, but the model has 3 pipeline blocks"
  --set parallelism.pp_engine=zb_v --set model.model_config.num_hidden_layers=1)
triax_chunk_refusal(zb_h1_with_too_few_micro_batches
  "tokens.batch_accumulation_per_replica: zb_h1 needs at least parallelism.pp = 2 micro-batches per step to fill its pipeline, got 1"
  --set parallelism.pp_engine=zb_h1 --set tokens.batch_accumulation_per_replica=1)
triax_chunk_refusal(chunks_for_zb_h1
  "parallelism.pp_chunks_per_rank: 2, but engine 'zb_h1' runs 1 model chunk"
  --set parallelism.pp_engine=zb_h1 --set parallelism.pp_chunks_per_rank=2)
triax_chunk_refusal(pass_times_of_two_numbers
  "parallelism.pp_pass_times.*expected three times above 0"
  --set parallelism.pp_engine=zb_v --set "parallelism.pp_pass_times=[1.0, 2.0]")
set_property(TEST model_chunks.refuses_zb_v_with_too_few_blocks model_chunks.refuses_zb_h1_with_too_few_micro_batches
             model_chunks.refuses_chunks_for_zb_h1 model_chunks.refuses_pass_times_of_two_numbers
             APPEND PROPERTY LABELS zero_bubble)

# Parity with the single-rank run (parity.cmake: 10 steps of the tiny Llama with tied embeddings,
# losses, gradient norms and final parameters within 1e-5), each engine at pp 2 with whole layers
# recomputed, at pp 4 with the measured peaks of micro-batches in flight, and at dp 2 x tp 2
# (sequence parallel) x pp 2 with ZeRO-1 (zb_h1 with the tp collectives overlapped); zb_v also
# with ZeRO-3, whose tied embedding and head share one rank (and its shards) in the V.
function(triax_zero_bubble_parity_case name)
  triax_parity_case(${name} ${ARGN})
  set_property(TEST parity.${name} APPEND PROPERTY LABELS zero_bubble)
endfunction()
# The recompute cases order their passes for measured times (parallelism.pp_pass_times).
function(triax_zero_bubble_recompute_case engine)
  triax_config_parity_case(parity.pp2_${engine}_recompute_layer CONFIG ${PARITY_CONFIG}
                           REFERENCE ${PARITY_DIR}/reference FIXTURE parity_reference
                           LABELS "parity;multi_rank;zero_bubble" DP 1 TP 1 PP 2 ENGINE ${engine} ZERO 0
                           MODE ALL_REDUCE --set parallelism.recompute_layer=true
                           --set "parallelism.pp_pass_times=[1.0, 1.4, 0.8]")
endfunction()
triax_zero_bubble_recompute_case(zb_h1)
triax_zero_bubble_recompute_case(zb_v)
triax_zero_bubble_parity_case(pp4_zb_h1 DP 1 TP 1 PP 4 ENGINE zb_h1 ZERO 0 MODE ALL_REDUCE PEAK_LIVE "4 4 4 4")
triax_zero_bubble_parity_case(pp4_zb_v DP 1 TP 1 PP 4 ENGINE zb_v LAYERS 6 ZERO 0 MODE ALL_REDUCE PEAK_LIVE "8 8 8 8")
triax_zero_bubble_parity_case(dp2_tp2_pp2_sp_zb_h1_zero1_overlap DP 2 TP 2 PP 2 ENGINE zb_h1 ZERO 1
                              MODE REDUCE_SCATTER OVERLAP PEAK_LIVE "2 2 2 2 2 2 2 2")
triax_zero_bubble_parity_case(dp2_tp2_pp2_sp_zb_v_zero1 DP 2 TP 2 PP 2 ENGINE zb_v ZERO 1 MODE REDUCE_SCATTER
                              PEAK_LIVE "4 4 4 4 4 4 4 4")
triax_zero_bubble_parity_case(dp2_pp2_zb_v_zero3 DP 2 TP 1 PP 2 ENGINE zb_v ZERO 3 MODE ALL_REDUCE)

# `triax inspect schedule`: the simulator's table at equal times (zb_v's bubble at pp 4 and 16
# micro-batches, 1.5 chunk passes of the last rank's wait in 49.5), and the measure of one stage of
# the tiny Llama on the CPU feeding it.
add_test(NAME zero_bubble.inspect_schedule
         COMMAND $<TARGET_FILE:triax> inspect schedule --pp 4 --micro-batches 16)
set_tests_properties(zero_bubble.inspect_schedule PROPERTIES LABELS zero_bubble
                     PASS_REGULAR_EXPRESSION "\\| zb_v \\| 4 \\| 16 \\| 49\\.50 \\| 3\\.0% \\| 4\\.0 \\|")
add_test(NAME zero_bubble.inspect_schedule_measure
         COMMAND $<TARGET_FILE:triax> inspect schedule --measure ${PROJECT_SOURCE_DIR}/configs/tiny_llama.yaml
                 --pp 2 --micro-batches 4 --repeat 1)
set_tests_properties(zero_bubble.inspect_schedule_measure PROPERTIES LABELS zero_bubble ENVIRONMENT "OMP_NUM_THREADS=1"
                     PASS_REGULAR_EXPRESSION "measured: 1 of the model's 2 layers.*pp_pass_times=.*\\| zb_v \\| 2 \\| 4 \\|")

# The record of pipeline passes (parallelism.pp_pass_record) of a 2-rank run, with whole backwards
# (1f1b) and with split ones in a V (zb_v): its structure (pass_record_check.py), and `triax
# inspect schedule --record` predicting the run's step from it.
foreach(engine 1f1b zb_v)
  add_test(NAME zero_bubble.pass_record_${engine}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/pass_record_test.sh $<TARGET_FILE:triax> ${MPIEXEC_EXECUTABLE}
                   ${PARITY_CONFIG} ${CMAKE_CURRENT_BINARY_DIR}/pass_record/${engine} ${engine})
  set_tests_properties(zero_bubble.pass_record_${engine} PROPERTIES LABELS "zero_bubble;multi_rank" PROCESSORS 2
                       TIMEOUT 180 ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")
endforeach()

# Sends moved up to just after the passes that make their tensors (hosts whose sends return at
# once: the mpi backend) and the simulator of the steps as placed.
add_executable(early_sends_test ${CMAKE_CURRENT_LIST_DIR}/early_sends_test.cpp)
target_link_libraries(early_sends_test PRIVATE triax_pipeline_schedules GTest::gtest_main)
triax_discover_test_suites(early_sends_test PROPERTIES LABELS zero_bubble)
