# ctest driver (cmake -P): installs the triax build into a scratch prefix, builds the
# out-of-tree plugin project against it (../out_of_tree_build.cmake, whose -D variables it
# takes), and has the loader accept and run the result.
#
#   -DCHECKER=          plugin_registry_test (runs its OutOfTreePlugin test on the result)
set(TEST_NAME "out-of-tree plugin")
include("${CMAKE_CURRENT_LIST_DIR}/../out_of_tree_build.cmake")
if(NOT CHECKER)
  message(FATAL_ERROR "run_test.cmake: -DCHECKER= is required")
endif()
triax_build_out_of_tree()

if(NOT EXISTS "${WORK_DIR}/build/oot_sgd.so")
  message(FATAL_ERROR "out-of-tree plugin: ${WORK_DIR}/build/oot_sgd.so was not built")
endif()
triax_run_step("load and step through the loader"
  ${CMAKE_COMMAND} -E env "TRIAX_OUT_OF_TREE_PLUGIN_DIR=${WORK_DIR}/build"
  "${CHECKER}" --gtest_filter=OutOfTreePlugin.*)
