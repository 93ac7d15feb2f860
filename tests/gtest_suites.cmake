# triax_discover_test_suites(<target> [TEST_FILTER filter] [TEST_SUFFIX suffix] [TEST_LIST var]
#                            [DISCOVERY_TIMEOUT seconds] [PROPERTIES name value ...])
#
# One ctest entry per GoogleTest suite of <target>, named <target>.<Suite><suffix> and running
# --gtest_filter=<Suite>.* (or the suite's cases that TEST_FILTER selects, named one by one). One
# process per suite instead of one per case: a LibTorch test program takes 0.3 to 0.6 s to start.
# The suites are listed from the built program after each link (gtest_suites_listing.cmake), and
# ctest reads the list from an include file. PROPERTIES go to every entry; a TIMEOUT among them is
# per case, so an entry gets it times its number of cases, at most triax_suite_timeout_cap seconds
# (and never less than one case's). An entry whose cases all skip (no GPU) reads as skipped; a
# failing case is named by GoogleTest's output. TEST_LIST names a variable that holds the entries'
# names when ctest reads them.
set(triax_suite_timeout_cap 1800)
set(triax_suite_listing_script ${CMAKE_CURRENT_LIST_DIR}/gtest_suites_listing.cmake)

function(triax_discover_test_suites target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TEST_FILTER;TEST_SUFFIX;TEST_LIST;DISCOVERY_TIMEOUT" "PROPERTIES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "triax_discover_test_suites(${target}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_DISCOVERY_TIMEOUT)
    set(arg_DISCOVERY_TIMEOUT 5)
  endif()
  if(NOT arg_TEST_LIST)
    set(arg_TEST_LIST ${target}_TESTS)
  endif()
  # Several calls may split one program by filter: each writes files of its own.
  get_property(calls GLOBAL PROPERTY triax_suite_calls_${target})
  math(EXPR calls "${calls} + 0")
  math(EXPR next "${calls} + 1")
  set_property(GLOBAL PROPERTY triax_suite_calls_${target} ${next})
  set(stem ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_${calls})

  triax_write_suite_spec(${stem} ${target} "${arg_TEST_FILTER}" "${arg_TEST_SUFFIX}" ${arg_TEST_LIST}
    ${arg_DISCOVERY_TIMEOUT} "${arg_PROPERTIES}")

  add_custom_command(TARGET ${target} POST_BUILD BYPRODUCTS ${stem}_tests.cmake
    COMMAND ${CMAKE_COMMAND} -D SPEC=${stem}_spec.cmake -D TEST_EXECUTABLE=$<TARGET_FILE:${target}>
            -P ${triax_suite_listing_script}
    VERBATIM)
  # Before the first build ctest shows one entry that fails, instead of none.
  file(WRITE ${stem}_include.cmake
    "if(EXISTS [==[${stem}_tests.cmake]==])\n  include([==[${stem}_tests.cmake]==])\n"
    "else()\n  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${stem}_include.cmake)
endfunction()

# Writes what the listing script needs to know at build time into <stem>_spec.cmake. The
# properties become text for set_tests_properties, each value in brackets: a value that is itself a
# list ("moe;gpu") stays one value. TIMEOUT is kept apart: it is per case.
function(triax_write_suite_spec stem target filter suffix list_var discovery_timeout properties)
  set(case_timeout "")
  set(properties_text "")
  set(pairs "${properties}")  # quoted: a value's own semicolons stay escaped
  while(pairs)
    list(POP_FRONT pairs name value)
    if(name STREQUAL "TIMEOUT")
      set(case_timeout ${value})
    else()
      string(APPEND properties_text " [=[${name}]=] [=[${value}]=]")
    endif()
  endwhile()
  file(WRITE ${stem}_spec.cmake
    "set(suite_target [==[${target}]==])\n"
    "set(suite_filter [==[${filter}]==])\n"
    "set(suite_suffix [==[${suffix}]==])\n"
    "set(suite_list_variable [==[${list_var}]==])\n"
    "set(suite_discovery_timeout ${discovery_timeout})\n"
    "set(suite_case_timeout [==[${case_timeout}]==])\n"
    "set(suite_timeout_cap ${triax_suite_timeout_cap})\n"
    "set(suite_working_directory [==[${CMAKE_CURRENT_BINARY_DIR}]==])\n"
    "set(suite_properties_text [==[${properties_text}]==])\n"
    "set(suite_output [==[${stem}_tests.cmake]==])\n")
endfunction()

# triax_add_area_suites(<target> SUITES <pattern>... [PROPERTIES <name> <value>...])
#
# For a program that several areas fill with their files (sdk_test, core_test): registers the
# suites one area names, with that area's properties. triax_add_other_suites(<target>), called
# where the program is defined, registers at the end of the directory the suites no area named:
# the *Cuda ones with the label gpu, the others without a label, so that no suite goes unrun.
function(triax_add_area_suites target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SUITES;PROPERTIES")
  list(JOIN arg_SUITES ":" filter)
  set_property(GLOBAL APPEND PROPERTY triax_named_suites_${target} ${arg_SUITES})
  triax_discover_test_suites(${target} DISCOVERY_TIMEOUT 60 TEST_FILTER "${filter}" PROPERTIES ${arg_PROPERTIES})
endfunction()

function(triax_add_other_suites target)
  cmake_language(EVAL CODE "cmake_language(DEFER CALL triax_register_other_suites [==[${target}]==])")
endfunction()

function(triax_register_other_suites target)
  get_property(named GLOBAL PROPERTY triax_named_suites_${target})
  list(JOIN named ":" named)
  triax_discover_test_suites(${target} DISCOVERY_TIMEOUT 60 TEST_FILTER "-${named}:*Cuda.*")
  triax_discover_test_suites(${target} DISCOVERY_TIMEOUT 60 TEST_FILTER "*Cuda.*-${named}" PROPERTIES LABELS gpu)
endfunction()
