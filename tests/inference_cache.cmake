# Inference with a cache (included from tests/CMakeLists.txt): the Llama plugin's cached
# incremental logits against its full forward on one rank (with pipeline stages, refusals and
# the host's ModelInstance through generate's CachedModel), and at tp = 2 under mpirun.
add_executable(inference_cache_test ${CMAKE_CURRENT_LIST_DIR}/inference_cache_test.cpp)
target_link_libraries(inference_cache_test PRIVATE triax_llama_impl triax_generate GTest::gtest_main)
triax_use_pch(inference_cache_test)
triax_discover_test_suites(inference_cache_test)

target_sources(multi_rank_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/inference_cache_tp_test.cpp)
target_link_libraries(multi_rank_test PRIVATE triax_llama_impl)
triax_add_multi_rank_suites(NAME inference_cache_tp_2_ranks RANKS 2 SUITES Modes/InferenceCacheTpTest TIMEOUT 120)

# The ops a decoding step runs per layer (each a kernel launch on a GPU), held at today's count.
add_executable(decode_op_count_test ${CMAKE_CURRENT_LIST_DIR}/decode_op_count_test.cpp)
target_link_libraries(decode_op_count_test PRIVATE triax_llama_impl triax_core GTest::gtest_main)
triax_use_pch(decode_op_count_test)
triax_discover_test_suites(decode_op_count_test)

# Greedy tokens with TRIAX_DECODE_NORM_GEMV=1 (the norms folded into the decoding step's products)
# equal those without, on CUDA (the test runs its binary once each way).
add_executable(decode_norm_gemv_generation_test ${CMAKE_CURRENT_LIST_DIR}/decode_norm_gemv_generation_test.cpp)
target_link_libraries(decode_norm_gemv_generation_test PRIVATE triax_llama_impl triax_core GTest::gtest_main)
triax_use_pch(decode_norm_gemv_generation_test)
triax_discover_test_suites(decode_norm_gemv_generation_test PROPERTIES LABELS gpu)
