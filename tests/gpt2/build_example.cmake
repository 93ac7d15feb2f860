# ctest driver (cmake -P): builds sdk/examples/gpt2 against a clean install of this triax build
# (../out_of_tree_build.cmake, whose -D variables it takes). The plugin lands in WORK_DIR/build.
set(TEST_NAME "gpt2 example")
include("${CMAKE_CURRENT_LIST_DIR}/../out_of_tree_build.cmake")
triax_build_out_of_tree()
if(NOT EXISTS "${WORK_DIR}/build/gpt2.so")
  message(FATAL_ERROR "gpt2 example: ${WORK_DIR}/build/gpt2.so was not built")
endif()
