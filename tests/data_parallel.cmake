# Data-parallel gradients, ZeRO-1 and whole dp runs against one rank, under mpirun at 2 and 4 ranks.
target_sources(multi_rank_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/data_parallel_test.cpp
                                      ${CMAKE_CURRENT_LIST_DIR}/data_parallel_handoff_test.cpp)
add_dependencies(multi_rank_test triax_llama triax_afab triax_adamw triax_zero1_adamw)
set(data_parallel_suites DataParallelGradients DataParallelTraining GlobalGradientNorm Zero1AdamW)
triax_add_multi_rank_suites(NAME data_parallel_2_ranks RANKS 2 SUITES ${data_parallel_suites} TIMEOUT 120)
triax_add_multi_rank_suites(NAME data_parallel_4_ranks RANKS 4 SUITES ${data_parallel_suites} TIMEOUT 120)
