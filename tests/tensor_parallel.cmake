# The SDK's tensor-parallel layers and the Llama model at tp = 2 and 4, both tp_modes, under
# mpirun through the mpi backend, against single-rank references.
add_executable(tensor_parallel_test ${CMAKE_CURRENT_LIST_DIR}/tensor_parallel_test.cpp)
target_link_libraries(tensor_parallel_test PRIVATE triax_llama_impl triax_multi_rank_main)
triax_use_pch(tensor_parallel_test)
triax_add_multi_rank_test(NAME tensor_parallel_2_ranks RANKS 2 COMMAND $<TARGET_FILE:tensor_parallel_test> TIMEOUT 120)
triax_add_multi_rank_test(NAME tensor_parallel_4_ranks RANKS 4 COMMAND $<TARGET_FILE:tensor_parallel_test> TIMEOUT 120)

# The fused q/k/v and gate/up projections against the unfused computation, at tp 1, 2 and 4.
add_executable(fused_projections_test ${CMAKE_CURRENT_LIST_DIR}/fused_projections_test.cpp)
target_link_libraries(fused_projections_test PRIVATE triax_sdk triax_multi_rank_main)
triax_use_pch(fused_projections_test)
foreach(ranks 1 2 4)
  triax_add_multi_rank_test(NAME fused_projections_${ranks}_ranks RANKS ${ranks}
                            COMMAND $<TARGET_FILE:fused_projections_test> TIMEOUT 120)
endforeach()

# RowParallelLinear's channel-major input against the [b, s, in] input, at tp 1 and 2.
add_executable(channel_major_linear_test ${CMAKE_CURRENT_LIST_DIR}/channel_major_linear_test.cpp)
target_link_libraries(channel_major_linear_test PRIVATE triax_sdk triax_multi_rank_main)
triax_use_pch(channel_major_linear_test)
foreach(ranks 1 2)
  triax_add_multi_rank_test(NAME channel_major_linear_${ranks}_ranks RANKS ${ranks}
                            COMMAND $<TARGET_FILE:channel_major_linear_test> TIMEOUT 120)
endforeach()
