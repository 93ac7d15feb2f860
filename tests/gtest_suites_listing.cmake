# Run after a test program is linked (cmake -D SPEC=<stem>_spec.cmake -D TEST_EXECUTABLE=<program>
# -P this file; see gtest_suites.cmake): lists its GoogleTest suites and writes the ctest entries,
# one per suite, into the file the spec names.
cmake_minimum_required(VERSION 3.22)
include(${SPEC})

# The program's --gtest_list_tests output (with --gtest_filter=<filter> when one is given).
function(triax_list_cases out_var filter)
  set(filter_argument "")
  if(NOT filter STREQUAL "")
    set(filter_argument "--gtest_filter=${filter}")
  endif()
  execute_process(COMMAND ${TEST_EXECUTABLE} --gtest_list_tests ${filter_argument}
    WORKING_DIRECTORY ${suite_working_directory} TIMEOUT ${suite_discovery_timeout}
    OUTPUT_VARIABLE output ERROR_VARIABLE output RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${TEST_EXECUTABLE} --gtest_list_tests ${filter_argument} failed (${status}):\n${output}")
  endif()
  set(${out_var} "${output}" PARENT_SCOPE)
endfunction()

# Reads a listing into <prefix>_suites (the suites in order) and <prefix>_<suite>_cases (each
# suite's cases). A suite line is "Suite." (with "  # TypeParam = ..." for a typed one), a case
# line "  Case" (with "  # GetParam() = ..."); other lines (gtest_main's greeting) are not either.
# Disabled suites and cases are left out, as GoogleTest's own run leaves them.
function(triax_parse_listing prefix listing)
  string(REPLACE ";" "\\;" listing "${listing}")
  string(REPLACE "\n" ";" lines "${listing}")
  set(suites "")
  set(suite "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE " *#.*$" "" line "${line}")
    if(line MATCHES "^([A-Za-z_][A-Za-z0-9_/]*)\\.$")
      set(suite "${CMAKE_MATCH_1}")
      if(suite MATCHES "(^|/)DISABLED_")
        set(suite "")
      else()
        list(APPEND suites "${suite}")
        set(${prefix}_${suite}_cases "")
      endif()
    elseif(NOT suite STREQUAL "" AND line MATCHES "^  ([A-Za-z0-9_/]+)$")
      set(case "${CMAKE_MATCH_1}")
      if(NOT case MATCHES "^DISABLED_")
        list(APPEND ${prefix}_${suite}_cases "${case}")
      endif()
    endif()
  endforeach()
  set(${prefix}_suites "${suites}" PARENT_SCOPE)
  foreach(suite IN LISTS suites)
    set(${prefix}_${suite}_cases "${${prefix}_${suite}_cases}" PARENT_SCOPE)
  endforeach()
endfunction()

# The --gtest_filter of a suite's entry: "Suite.*" when the filter keeps all its cases, else its
# kept cases one by one (a filter may split a suite between entries).
function(triax_suite_filter out_var suite kept all)
  if(kept STREQUAL all)
    set(${out_var} "${suite}.*" PARENT_SCOPE)
    return()
  endif()
  list(TRANSFORM kept PREPEND "${suite}.")
  list(JOIN kept ":" cases)
  set(${out_var} "${cases}" PARENT_SCOPE)
endfunction()

# An entry's seconds: the per-case TIMEOUT times its cases, at most the cap, never below one case.
function(triax_suite_timeout out_var case_count)
  math(EXPR seconds "${suite_case_timeout} * ${case_count}")
  if(seconds GREATER suite_timeout_cap)
    set(seconds ${suite_timeout_cap})
  endif()
  if(seconds LESS suite_case_timeout)
    set(seconds ${suite_case_timeout})
  endif()
  set(${out_var} ${seconds} PARENT_SCOPE)
endfunction()

triax_list_cases(kept_listing "${suite_filter}")
triax_parse_listing(kept "${kept_listing}")
if(suite_filter STREQUAL "")
  set(all_listing "${kept_listing}")
else()
  triax_list_cases(all_listing "")
endif()
triax_parse_listing(all "${all_listing}")

# Skipped only when no case passed and none failed: GoogleTest's summary then ends with the skipped
# list (a failure would follow it), so one skipped case never hides a failing one.
set(skipped_only "\\[  PASSED  \\] 0 tests\\.\n\\[  SKIPPED \\] [0-9]+ tests?, listed below:\n(\\[  SKIPPED \\] [^\n]*\n)*(\n *YOU HAVE [0-9]+ DISABLED TESTS?\n\n)?$")
set(entries "")
set(script "")
foreach(suite IN LISTS kept_suites)
  if("${kept_${suite}_cases}" STREQUAL "")
    continue()
  endif()
  set(name "${suite_target}.${suite}${suite_suffix}")
  list(APPEND entries "${name}")
  triax_suite_filter(filter "${suite}" "${kept_${suite}_cases}" "${all_${suite}_cases}")
  string(APPEND script "add_test([==[${name}]==] [==[${TEST_EXECUTABLE}]==] [==[--gtest_filter=${filter}]==])\n"
    "set_tests_properties([==[${name}]==] PROPERTIES WORKING_DIRECTORY [==[${suite_working_directory}]==]"
    " SKIP_REGULAR_EXPRESSION [==[${skipped_only}]==]${suite_properties_text})\n")
  if(NOT suite_case_timeout STREQUAL "")
    list(LENGTH kept_${suite}_cases case_count)
    triax_suite_timeout(seconds ${case_count})
    string(APPEND script "set_tests_properties([==[${name}]==] PROPERTIES TIMEOUT ${seconds})\n")
  endif()
endforeach()
string(APPEND script "set([==[${suite_list_variable}]==] [==[${entries}]==])\n")
file(WRITE ${suite_output} "${script}")
