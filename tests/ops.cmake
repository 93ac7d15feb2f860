# Operations and everyday use: TensorBoard events read back by the tensorboard package, plots,
# progress lines, profiler traces and the benchmark CSV, a real single-node Slurm, nanotron's
# command-line habits, and every README command run as written.
add_test(NAME ops_tensorboard_plot
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/ops/tensorboard_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR})
set_tests_properties(ops_tensorboard_plot PROPERTIES TIMEOUT 240 ENVIRONMENT "OMP_NUM_THREADS=1" LABELS python)
# tools/plot's loss title names the dotted validation line only for runs that validated.
add_test(NAME ops_plot_title
  COMMAND ${PROJECT_SOURCE_DIR}/.venv/bin/python ${CMAKE_CURRENT_LIST_DIR}/ops/plot_title_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(ops_plot_title PROPERTIES TIMEOUT 60 LABELS python)
add_test(NAME ops_profiler_benchmark
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/ops/profiler_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR})
set_tests_properties(ops_profiler_benchmark PROPERTIES TIMEOUT 240 ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME ops_nanotron_habits
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/ops/nanotron_habits_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR})
set_tests_properties(ops_nanotron_habits PROPERTIES TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=1" LABELS python)
# Starts and stops its own munged, slurmctld and slurmd; skipped (77) where they are not installed.
add_test(NAME ops_slurm_launch
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/ops/slurm_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR})
set_tests_properties(ops_slurm_launch PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 PROCESSORS 2 RUN_SERIAL ON)
# Not RUN_SERIAL: its commands run one after another, most on one process (the few multi-rank ones
# last seconds), and a serial minute left the other core idle. It starts first (test_costs.cmake).
add_test(NAME ops_readme_commands
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/ops/readme_commands_test.sh ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR})
set_tests_properties(ops_readme_commands PROPERTIES TIMEOUT 900 LABELS "python;slow")
