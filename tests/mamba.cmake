# The mamba model plugin's unit tests (included from tests/CMakeLists.txt): config, initialisation,
# logits against an independent reference, recomputation, bad input, and generation through the
# cache, and the op counts of one layer's step. They link the model code directly (triax_mamba_impl).
add_executable(mamba_test ${CMAKE_CURRENT_LIST_DIR}/mamba_model_test.cpp ${CMAKE_CURRENT_LIST_DIR}/mamba_cache_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/mamba_op_count_test.cpp)
target_link_libraries(mamba_test PRIVATE triax_mamba_impl GTest::gtest_main)
triax_use_pch(mamba_test)
triax_discover_test_suites(mamba_test)
