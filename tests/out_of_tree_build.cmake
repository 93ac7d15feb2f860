# Shared by the out-of-tree ctest drivers (cmake -P): install the triax build into a scratch
# prefix and configure and build a plugin project against it, as a plugin author would.
#
#   include(out_of_tree_build.cmake)
#   triax_build_out_of_tree()      # uses the variables below; the project's build lands in WORK_DIR/build
#
#   -DTRIAX_BUILD_DIR=  the triax build tree (built)
#   -DSOURCE_DIR=       the plugin project
#   -DWORK_DIR=         scratch folder (emptied first): WORK_DIR/prefix, WORK_DIR/build
#   -DPREFIX_PATH=      the outer build's CMAKE_PREFIX_PATH, entries separated by '|'
#   -DTORCH_DIR=        folder of LibTorch's TorchConfig.cmake used by the outer build
#   -DGENERATOR= -DMAKE_PROGRAM= -DCXX_COMPILER=   as in the outer build
#   -DCXX_LAUNCHER=     the outer build's compiler launcher (ccache ...), entries separated by '|'
#   -DTEST_NAME=        prefixes the messages ("out-of-tree plugin")

function(triax_run_step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${TEST_NAME}: ${name} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${TEST_NAME}: ${name}: ok")
endfunction()

# The arguments that configure SOURCE_DIR into `build_dir` against the prefixes in the environment.
function(triax_out_of_tree_configure_args build_dir out_var)
  set(args -S "${SOURCE_DIR}" -B "${build_dir}" -G "${GENERATOR}" "-DTorch_DIR=${TORCH_DIR}" -DCMAKE_BUILD_TYPE=Release)
  if(MAKE_PROGRAM)
    list(APPEND args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
  endif()
  if(CXX_COMPILER)
    list(APPEND args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
  endif()
  set(${out_var} ${args} PARENT_SCOPE)
endfunction()

# The search prefixes go through the environment (':'-separated), which keeps a list intact.
function(triax_use_prefix prefix)
  string(REPLACE "|" ":" prefix_path "${PREFIX_PATH}")
  set(ENV{CMAKE_PREFIX_PATH} "${prefix}:${prefix_path}")
endfunction()

macro(triax_build_out_of_tree)
  foreach(var TRIAX_BUILD_DIR SOURCE_DIR WORK_DIR TORCH_DIR GENERATOR TEST_NAME)
    if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
      message(FATAL_ERROR "${CMAKE_CURRENT_LIST_FILE}: -D${var}= is required")
    endif()
  endforeach()
  file(REMOVE_RECURSE "${WORK_DIR}")
  file(MAKE_DIRECTORY "${WORK_DIR}")
  triax_run_step("install triax" ${CMAKE_COMMAND} --install "${TRIAX_BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
  triax_use_prefix("${WORK_DIR}/prefix")
  if(CXX_LAUNCHER)
    # A launcher may be a command with arguments, a list: the environment carries it intact.
    string(REPLACE "|" ";" launcher "${CXX_LAUNCHER}")
    set(ENV{CMAKE_CXX_COMPILER_LAUNCHER} "${launcher}")
  endif()
  triax_out_of_tree_configure_args("${WORK_DIR}/build" configure_args)
  triax_run_step("configure against the installed SDK" ${CMAKE_COMMAND} ${configure_args})
  triax_run_step("build" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
endmacro()
