# The mamba2 model plugin's unit tests (included from tests/CMakeLists.txt): the chunked SSD
# against the sequential scan (fp64, gradients), config and bad input, initialisation, logits
# against an independent reference, recomputation, and the Hugging Face mapping. They link the
# model code directly (triax_mamba2_impl).
add_executable(mamba2_test ${CMAKE_CURRENT_LIST_DIR}/mamba2_ssd_test.cpp ${CMAKE_CURRENT_LIST_DIR}/mamba2_config_test.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/mamba2_model_test.cpp)
target_link_libraries(mamba2_test PRIVATE triax_mamba2_impl GTest::gtest_main)
triax_use_pch(mamba2_test)
gtest_discover_tests(mamba2_test PROPERTIES LABELS mamba2)
