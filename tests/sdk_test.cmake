# sdk_test: one GoogleTest program for the single-process tests of the SDK's pieces (fused ops and
# the fused loss, fp8, ZeRO-3 blocks and side outputs, context-parallel slices and ring attention,
# QK-clip, deferred weight gradients). Each area adds its files with target_sources; one program
# instead of one per area compiles LibTorch's headers once per unity batch, not once per program.
#
# Areas register the suites they label with triax_add_area_suites (tests/gtest_suites.cmake); the
# others get an entry each without a label, the *Cuda ones with the label gpu.
add_executable(sdk_test)
target_link_libraries(sdk_test PRIVATE triax_sdk GTest::gtest_main)
target_include_directories(sdk_test PRIVATE ${PROJECT_SOURCE_DIR}/sdk/src)  # the SDK's private headers
triax_use_pch(sdk_test)
# All its files in one unity batch: each batch compiles LibTorch's headers once more.
set_target_properties(sdk_test PROPERTIES UNITY_BUILD_BATCH_SIZE 0)

# The SDK's own small pieces.
target_sources(sdk_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/environment_switch_test.cpp)

triax_add_other_suites(sdk_test)
