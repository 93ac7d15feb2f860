# core_test: one GoogleTest program for the single-process tests of the core library (the training
# loop's pieces, the checkpoint store, numerical faults, spectral muP rules). Each area adds its
# files with target_sources and registers its suites with triax_add_area_suites
# (tests/gtest_suites.cmake); one program instead of one per area compiles LibTorch's headers once
# per unity batch, not once per program.
add_executable(core_test)
target_link_libraries(core_test PRIVATE triax_core GTest::gtest_main)
target_compile_definitions(core_test PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
triax_use_pch(core_test)
# All its files in one unity batch: each batch compiles LibTorch's headers once more.
set_target_properties(core_test PROPERTIES UNITY_BUILD_BATCH_SIZE 0)
triax_add_other_suites(core_test)
