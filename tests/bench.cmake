# The benchmark tooling (tools/device): bench.sh run on CPU against a tiny model and a stand-in
# peer, so that the script is known to work before it reaches the GPU machine.
add_test(NAME bench_script
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/bench/bench_script_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR})
set_tests_properties(bench_script PROPERTIES TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=1")

# tools/device/step_profile.py on a hand-made two-step trace: kinds, kernels and idle time.
add_test(NAME step_profile_script
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/bench/step_profile_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(step_profile_script PROPERTIES TIMEOUT 60)
