# Multi-rank tests: real processes started by mpirun, talking through the real backend.
#
#   triax_add_multi_rank_test(NAME <name> RANKS <k> COMMAND <executable> [ARGS <arg>...] [TIMEOUT <s>]
#                             [PROCESSORS <n>])
#
# registers a ctest that runs `mpirun -n k --oversubscribe <executable> <args>` with Open MPI's
# run-as-root permission and one intra-op thread per rank; ctest kills it after TIMEOUT seconds
# (default 120). PROCESSORS (default k) is the number of cores the test keeps busy, which ctest
# reserves for it: a test whose ranks mostly wait (timeouts, process starts) names fewer, so that
# other tests run beside it. A gtest executable for it links triax_multi_rank_main (see
# multi_rank_environment.hpp), which initialises MPI and lets only rank 0 print the test log
# (every rank prints its own failures).
#
#   triax_add_multi_rank_suites(NAME <name> RANKS <k> SUITES <suite>... [TIMEOUT <s>] [PROCESSORS <n>])
#
# does the same with multi_rank_test, the one program that holds the multi-rank GoogleTest files
# (each area adds its own with target_sources), running only the named suites. One program instead
# of one per file: LibTorch's headers are compiled once per unity batch, not once per file.
# multi_rank_test.every_suite_registered fails when a suite of the program is run by no test.
include_guard(GLOBAL)

add_library(triax_multi_rank_main STATIC ${CMAKE_CURRENT_LIST_DIR}/multi_rank_main.cpp)
target_link_libraries(triax_multi_rank_main PUBLIC triax_comm GTest::gtest MPI::MPI_C)
target_include_directories(triax_multi_rank_main PUBLIC ${CMAKE_CURRENT_LIST_DIR})
# C only: Open MPI's deprecated C++ bindings would need libmpi_cxx.
target_compile_definitions(triax_multi_rank_main PUBLIC OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)

function(triax_add_multi_rank_test)
  cmake_parse_arguments(ARG "" "NAME;RANKS;TIMEOUT;PROCESSORS" "COMMAND;ARGS" ${ARGN})
  if(NOT ARG_NAME OR NOT ARG_RANKS OR NOT ARG_COMMAND)
    message(FATAL_ERROR "triax_add_multi_rank_test needs NAME, RANKS and COMMAND")
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  if(NOT ARG_PROCESSORS)
    set(ARG_PROCESSORS ${ARG_RANKS})
  endif()
  add_test(NAME ${ARG_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} -n ${ARG_RANKS} --oversubscribe ${ARG_COMMAND} ${ARG_ARGS})
  set_tests_properties(${ARG_NAME} PROPERTIES
    TIMEOUT ${ARG_TIMEOUT}
    PROCESSORS ${ARG_PROCESSORS}
    LABELS multi_rank
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")
endfunction()

add_executable(multi_rank_test)
target_link_libraries(multi_rank_test PRIVATE triax_multi_rank_main)
target_compile_definitions(multi_rank_test PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
triax_use_pch(multi_rank_test)
# All its files in one unity batch: each batch compiles LibTorch's headers once more.
set_target_properties(multi_rank_test PROPERTIES UNITY_BUILD_BATCH_SIZE 0)

function(triax_add_multi_rank_suites)
  cmake_parse_arguments(ARG "" "NAME;RANKS;TIMEOUT;PROCESSORS" "SUITES" ${ARGN})
  if(NOT ARG_SUITES)
    message(FATAL_ERROR "triax_add_multi_rank_suites(${ARG_NAME}) needs SUITES")
  endif()
  list(TRANSFORM ARG_SUITES APPEND ".*" OUTPUT_VARIABLE patterns)
  list(JOIN patterns ":" filter)
  set_property(GLOBAL APPEND PROPERTY triax_multi_rank_patterns ${patterns})
  set(optional "")
  foreach(key TIMEOUT PROCESSORS)
    if(ARG_${key})
      list(APPEND optional ${key} ${ARG_${key}})
    endif()
  endforeach()
  triax_add_multi_rank_test(NAME ${ARG_NAME} RANKS ${ARG_RANKS} COMMAND $<TARGET_FILE:multi_rank_test>
                            ARGS --gtest_filter=${filter} ${optional})
endfunction()

# Run once every area has registered its suites: the program lists the cases that no test runs.
function(triax_add_multi_rank_coverage_test)
  get_property(patterns GLOBAL PROPERTY triax_multi_rank_patterns)
  list(REMOVE_DUPLICATES patterns)
  list(JOIN patterns ":" filter)
  add_test(NAME multi_rank_test.every_suite_registered
           COMMAND $<TARGET_FILE:multi_rank_test> --gtest_list_tests --gtest_filter=-${filter})
  # A listed case is an indented line; the listing of no case is empty.
  set_tests_properties(multi_rank_test.every_suite_registered PROPERTIES TIMEOUT 60 LABELS multi_rank
    FAIL_REGULAR_EXPRESSION "(^|\n)  [A-Za-z0-9_]" ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endfunction()
cmake_language(DEFER CALL triax_add_multi_rank_coverage_test)
