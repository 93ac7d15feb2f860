# ctest driver (cmake -P): installs the triax build into a scratch prefix, builds the
# out-of-tree plugin project against it, and has the loader accept and run the result.
#
#   -DTRIAX_BUILD_DIR=  the triax build tree (built)
#   -DSOURCE_DIR=       this folder
#   -DWORK_DIR=         scratch folder (emptied first)
#   -DPREFIX_PATH=      the outer build's CMAKE_PREFIX_PATH, entries separated by '|'
#   -DTORCH_DIR=        folder of LibTorch's TorchConfig.cmake used by the outer build
#   -DGENERATOR= -DMAKE_PROGRAM= -DCXX_COMPILER=   as in the outer build
#   -DCXX_LAUNCHER=     the outer build's compiler launcher (ccache ...), entries separated by '|'
#   -DCHECKER=          plugin_registry_test (runs its OutOfTreePlugin test on the result)
foreach(var TRIAX_BUILD_DIR SOURCE_DIR WORK_DIR TORCH_DIR GENERATOR CHECKER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_test.cmake: -D${var}= is required")
  endif()
endforeach()

function(run_step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "out-of-tree plugin: ${name} failed (${rc}):\n${out}")
  endif()
  message(STATUS "out-of-tree plugin: ${name}: ok")
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

run_step("install triax" ${CMAKE_COMMAND} --install "${TRIAX_BUILD_DIR}" --prefix "${prefix}")

# The search prefixes go through the environment (':'-separated), which keeps a list intact.
string(REPLACE "|" ":" prefix_path "${PREFIX_PATH}")
set(ENV{CMAKE_PREFIX_PATH} "${prefix}:${prefix_path}")
set(configure_args -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
    "-DTorch_DIR=${TORCH_DIR}" -DCMAKE_BUILD_TYPE=Release)
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(CXX_LAUNCHER)
  # A launcher may be a command with arguments, a list: the environment carries it intact.
  string(REPLACE "|" ";" launcher "${CXX_LAUNCHER}")
  set(ENV{CMAKE_CXX_COMPILER_LAUNCHER} "${launcher}")
endif()
run_step("configure against the installed SDK" ${CMAKE_COMMAND} ${configure_args})
run_step("build" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")

if(NOT EXISTS "${WORK_DIR}/build/oot_sgd.so")
  message(FATAL_ERROR "out-of-tree plugin: ${WORK_DIR}/build/oot_sgd.so was not built")
endif()
run_step("load and step through the loader"
  ${CMAKE_COMMAND} -E env "TRIAX_OUT_OF_TREE_PLUGIN_DIR=${WORK_DIR}/build"
  "${CHECKER}" --gtest_filter=OutOfTreePlugin.*)
