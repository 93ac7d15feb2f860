# The benchmark tooling (tools/device): bench.sh run on CPU against a tiny model and a stand-in
# peer, so that the script is known to work before it reaches the GPU machine.
add_test(NAME bench_script
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/bench/bench_script_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR})
set_tests_properties(bench_script PROPERTIES TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=1")
