# sdk_test: one GoogleTest program for the single-process tests of the SDK's pieces (fused ops and
# the fused loss, fp8, ZeRO-3 blocks and side outputs, context-parallel slices and ring attention,
# QK-clip, deferred weight gradients). Each area adds its files with target_sources; one program
# instead of one per area compiles LibTorch's headers once per unity batch, not once per program.
#
#   triax_add_sdk_suites(SUITES <gtest pattern>... [PROPERTIES <name> <value>...])
#
# registers the suites an area labels (one ctest entry per suite, tests/gtest_suites.cmake). Every
# *Cuda suite carries the label gpu (skipped without a GPU); every other suite that no area names
# gets an entry without a label, so no suite of the program is left unrun.
add_executable(sdk_test)
target_link_libraries(sdk_test PRIVATE triax_sdk GTest::gtest_main)
target_include_directories(sdk_test PRIVATE ${PROJECT_SOURCE_DIR}/sdk/src)  # the SDK's private headers
triax_use_pch(sdk_test)

function(triax_add_sdk_suites)
  cmake_parse_arguments(ARG "" "" "SUITES;PROPERTIES" ${ARGN})
  list(JOIN ARG_SUITES ":" filter)
  set_property(GLOBAL APPEND PROPERTY triax_sdk_test_patterns ${ARG_SUITES})
  triax_discover_test_suites(sdk_test TEST_FILTER "${filter}" PROPERTIES ${ARG_PROPERTIES})
endfunction()

# Run once every area has named its suites.
function(triax_add_sdk_remaining_suites)
  get_property(patterns GLOBAL PROPERTY triax_sdk_test_patterns)
  list(APPEND patterns "*Cuda.*")
  list(JOIN patterns ":" filter)
  triax_discover_test_suites(sdk_test TEST_FILTER "-${filter}")
  triax_discover_test_suites(sdk_test TEST_FILTER "*Cuda.*" PROPERTIES LABELS gpu)
endfunction()
cmake_language(DEFER CALL triax_add_sdk_remaining_suites)
