# Model chunks asked for by an engine (ABI 1.3) and the interleaved_1f1b engine: its schedule for
# many shapes (plain C++, no LibTorch), the engine and PipelineStage over two real ranks with two
# chunks each and a three-tensor stage boundary, and the refusals of impossible requests, named
# by key, from whole runs under mpirun. The parity matrix (parity.cmake) trains with it.
add_executable(interleaved_schedule_test ${CMAKE_CURRENT_LIST_DIR}/interleaved_schedule_test.cpp)
target_link_libraries(interleaved_schedule_test PRIVATE triax_pipeline_schedules GTest::gtest_main)
triax_discover_test_suites(interleaved_schedule_test)

target_sources(multi_rank_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/interleaved_pipeline_test.cpp)
add_dependencies(multi_rank_test triax_interleaved_1f1b)
triax_add_multi_rank_suites(NAME interleaved_pipeline_2_ranks RANKS 2 SUITES InterleavedPipeline ModelChunksAbi)

# triax_chunk_refusal(<name> "<expected message>" --set KEY=VALUE...): a 2-rank run of the parity
# model (pp 2) that must stop before training with the message.
function(triax_chunk_refusal name expected)
  add_test(NAME model_chunks.refuses_${name}
           COMMAND ${MPIEXEC_EXECUTABLE} -n 2 --oversubscribe $<TARGET_FILE:parity_runner> run --config ${PARITY_CONFIG}
                   --out ${CMAKE_CURRENT_BINARY_DIR}/model_chunks/${name}
                   --set checkpoints.checkpoints_path=${CMAKE_CURRENT_BINARY_DIR}/model_chunks/${name}/run
                   --set parallelism.pp=2 ${ARGN})
  set_tests_properties(model_chunks.refuses_${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expected}"
                       LABELS multi_rank PROCESSORS 2 TIMEOUT 120
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")
endfunction()
# One layer is 3 pipeline blocks, fewer than 2 ranks x 2 chunks.
triax_chunk_refusal(more_chunks_than_blocks
  "parallelism.pp_chunks_per_rank: 2 model chunks on each of parallelism.pp = 2 pipeline ranks make 4 virtual stages, but the model has 3 pipeline blocks"
  --set parallelism.pp_engine=interleaved_1f1b --set parallelism.pp_chunks_per_rank=2
  --set model.model_config.num_hidden_layers=1)
triax_chunk_refusal(micro_batches_not_a_multiple_of_pp
  "tokens.batch_accumulation_per_replica: interleaved_1f1b with parallelism.pp_chunks_per_rank = 2 .* needs a multiple of 2 micro-batches per step, got 3"
  --set parallelism.pp_engine=interleaved_1f1b --set parallelism.pp_chunks_per_rank=2
  --set tokens.batch_accumulation_per_replica=3)
triax_chunk_refusal(chunks_for_an_engine_without_them
  "parallelism.pp_chunks_per_rank: 2, but engine '1f1b' runs 1 model chunk"
  --set parallelism.pp_engine=1f1b --set parallelism.pp_chunks_per_rank=2)
