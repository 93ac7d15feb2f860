# The checkpoint store: HDF5 files, folder rules, save/resume in one process and bad checkpoints
# (checkpoint_test, checkpoint_staging_test); resharding across topologies and crash safety on
# real processes are in checkpoint_topology.cmake.
add_executable(checkpoint_test checkpoint_test.cpp)
target_link_libraries(checkpoint_test PRIVATE triax_core GTest::gtest_main)
target_compile_definitions(checkpoint_test PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
add_dependencies(checkpoint_test triax_llama triax_afab triax_adamw triax_zero1_adamw)
triax_use_pch(checkpoint_test)
triax_discover_test_suites(checkpoint_test DISCOVERY_TIMEOUT 60 TEST_FILTER "-*Cuda.*" PROPERTIES TIMEOUT 300)
# Which pieces a background save stages in device memory, and its host copies (no training run).
add_executable(checkpoint_staging_test checkpoint_staging_test.cpp)
target_link_libraries(checkpoint_staging_test PRIVATE triax_core GTest::gtest_main)
triax_use_pch(checkpoint_staging_test)
triax_discover_test_suites(checkpoint_staging_test DISCOVERY_TIMEOUT 60 TEST_FILTER "-*Cuda.*" PROPERTIES TIMEOUT 60)
# Its staged copies through one kernel launch on a GPU (label gpu; skipped without a GPU).
triax_discover_test_suites(checkpoint_staging_test DISCOVERY_TIMEOUT 60 TEST_FILTER "*Cuda.*"
                           TEST_LIST checkpoint_staging_test_cuda PROPERTIES LABELS gpu TIMEOUT 60)
# A background save staged in spare device memory on one GPU (label gpu; skipped without a GPU).
triax_discover_test_suites(checkpoint_test DISCOVERY_TIMEOUT 60 TEST_FILTER "*Cuda.*" TEST_LIST checkpoint_test_cuda
                           PROPERTIES LABELS gpu TIMEOUT 300)
