# The SDK's tensor-parallel layers and the Llama model at tp = 2 and 4, both tp_modes, under
# mpirun through the mpi backend, against single-rank references.
target_sources(multi_rank_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/tensor_parallel_test.cpp)
target_link_libraries(multi_rank_test PRIVATE triax_llama_impl)
triax_add_multi_rank_suites(NAME tensor_parallel_2_ranks RANKS 2 SUITES Modes/TensorParallelTest TIMEOUT 120)
triax_add_multi_rank_suites(NAME tensor_parallel_4_ranks RANKS 4 SUITES Modes/TensorParallelTest TIMEOUT 120)

# The fused q/k/v and gate/up projections against the unfused computation, at tp 1, 2 and 4.
target_sources(multi_rank_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/fused_projections_test.cpp)
foreach(ranks 1 2 4)
  triax_add_multi_rank_suites(NAME fused_projections_${ranks}_ranks RANKS ${ranks} SUITES Modes/FusedProjectionsTest
                              TIMEOUT 120)
endforeach()

# RowParallelLinear's channel-major input against the [b, s, in] input, at tp 1 and 2.
target_sources(multi_rank_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/channel_major_linear_test.cpp)
foreach(ranks 1 2)
  triax_add_multi_rank_suites(NAME channel_major_linear_${ranks}_ranks RANKS ${ranks}
                              SUITES Modes/ChannelMajorLinearTest TIMEOUT 120)
endforeach()
