# Source checks that need no build: no function longer than 60 lines in apps/, generate/ and core/
# (tools/function_lengths.py). core/src/comm, data and report are left out while their code moves
# into libraries of their own; the scan takes them in once they have moved.
add_test(NAME lint_function_lengths
  COMMAND python3 ${PROJECT_SOURCE_DIR}/tools/function_lengths.py --max 60 apps generate core
          --exclude core/src/comm --exclude core/src/data --exclude core/src/report
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(lint_function_lengths PROPERTIES TIMEOUT 60 LABELS lint)
# The checker itself, on hand-made C++: function bodies against initializers, literals and lambdas.
add_test(NAME lint_function_lengths_checker
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/lint/function_lengths_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(lint_function_lengths_checker PROPERTIES TIMEOUT 60 LABELS lint)
