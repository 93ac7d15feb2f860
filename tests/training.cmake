add_executable(training_test training_test.cpp gradient_handoff_test.cpp step_read_back_test.cpp step_times_test.cpp
               model_memory_test.cpp adamw_fp8_amax_test.cpp)
target_link_libraries(training_test PRIVATE triax_core GTest::gtest_main)
target_compile_definitions(training_test PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
target_include_directories(training_test PRIVATE ${PROJECT_SOURCE_DIR}/sdk/src)  # recorded_amax.hpp
add_dependencies(training_test triax_llama triax_afab triax_adamw triax_zero1_adamw)
triax_use_pch(training_test)
triax_discover_test_suites(training_test DISCOVERY_TIMEOUT 60 TEST_FILTER "-*Cuda.*" PROPERTIES TIMEOUT 300)
# The fused AdamW kernel against LibTorch's fused AdamW, and the weights' amax it records for the fp8
# casts (skip without a GPU).
triax_discover_test_suites(training_test DISCOVERY_TIMEOUT 60 TEST_FILTER "*Cuda.*" TEST_LIST training_test_cuda
                           PROPERTIES LABELS gpu)
