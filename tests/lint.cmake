# Source checks that need no build: no function longer than 60 lines in apps/, generate/, the core
# and the libraries beside it (tools/function_lengths.py).
add_test(NAME lint_function_lengths
  COMMAND python3 ${PROJECT_SOURCE_DIR}/tools/function_lengths.py --max 60 apps generate core config comm data report faults parallel convert checkpoint_async lr device
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(lint_function_lengths PROPERTIES TIMEOUT 60 LABELS lint)
# The checker itself, on hand-made C++: function bodies against initializers, literals and lambdas.
add_test(NAME lint_function_lengths_checker
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/lint/function_lengths_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(lint_function_lengths_checker PROPERTIES TIMEOUT 60 LABELS lint)
# No include points up the layers: the core's folders in their order, nothing of the core below it
# but the config (tools/layering.py; docs/architecture.md draws the layers).
add_test(NAME lint_layering
  COMMAND python3 ${PROJECT_SOURCE_DIR}/tools/layering.py ${PROJECT_SOURCE_DIR})
set_tests_properties(lint_layering PROPERTIES TIMEOUT 60 LABELS lint)
add_test(NAME lint_layering_checker
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/lint/layering_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(lint_layering_checker PROPERTIES TIMEOUT 60 LABELS lint)
# GoogleTest programs register one ctest entry per suite (tests/gtest_suites.cmake), not one per
# case: no direct gtest_discover_tests() in the tests' CMake files.
add_test(NAME lint_one_entry_per_suite
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/lint/one_entry_per_suite.py ${PROJECT_SOURCE_DIR})
set_tests_properties(lint_one_entry_per_suite PROPERTIES TIMEOUT 60 LABELS lint)
