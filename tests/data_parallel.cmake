# Data-parallel gradients, ZeRO-1 and whole dp runs against one rank, under mpirun at 2 and 4 ranks.
add_executable(data_parallel_test ${CMAKE_CURRENT_LIST_DIR}/data_parallel_test.cpp
                                  ${CMAKE_CURRENT_LIST_DIR}/data_parallel_handoff_test.cpp)
target_link_libraries(data_parallel_test PRIVATE triax_multi_rank_main)
target_compile_definitions(data_parallel_test PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
add_dependencies(data_parallel_test triax_llama triax_afab triax_adamw triax_zero1_adamw)
triax_use_pch(data_parallel_test)
triax_add_multi_rank_test(NAME data_parallel_2_ranks RANKS 2 COMMAND $<TARGET_FILE:data_parallel_test> TIMEOUT 120)
triax_add_multi_rank_test(NAME data_parallel_4_ranks RANKS 4 COMMAND $<TARGET_FILE:data_parallel_test> TIMEOUT 120)
