# Faults in the inputs (label faults): fuzzed configs checked as `triax train --check` does, the
# config errors a new user meets, and corrupt token files, index files and checkpoints.
add_executable(config_fuzz_test
  ${CMAKE_CURRENT_LIST_DIR}/config_fuzz_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config_mutations.cpp
  ${PROJECT_SOURCE_DIR}/apps/triax/run_check.cpp)
target_link_libraries(config_fuzz_test PRIVATE triax_convert triax_core GTest::gtest_main)
target_compile_definitions(config_fuzz_test PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}"
  TRIAX_CONFIGS_DIR="${PROJECT_SOURCE_DIR}/configs" TRIAX_FUZZ_WITH_PLUGINS)
add_dependencies(config_fuzz_test triax_llama triax_mamba triax_moe triax_afab triax_1f1b triax_interleaved_1f1b
  triax_adamw triax_zero1_adamw)
triax_discover_test_suites(config_fuzz_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300 LABELS faults)

# The same mutations through the loader alone (no LibTorch): what tools/sanitize.sh builds and runs
# under AddressSanitizer and UndefinedBehaviorSanitizer. Left out of the default build and of
# ctest: every check it makes, config_fuzz_test makes on the same mutations (the loader runs
# first there too), so the suite would compile and run the same cases twice.
add_executable(config_fuzz_loader_test EXCLUDE_FROM_ALL
  ${CMAKE_CURRENT_LIST_DIR}/config_fuzz_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config_mutations.cpp
  ${TRIAX_CONFIG_LOADER_SOURCES})
target_include_directories(config_fuzz_loader_test PRIVATE
  ${PROJECT_SOURCE_DIR}/core/include ${PROJECT_SOURCE_DIR}/sdk/include)
target_link_libraries(config_fuzz_loader_test PRIVATE triax_config GTest::gtest_main)
target_compile_definitions(config_fuzz_loader_test PRIVATE TRIAX_CONFIGS_DIR="${PROJECT_SOURCE_DIR}/configs")

# Corrupt token files, index files and checkpoints (every kind of dataset of a rank file, the
# metadata, the `latest` pointer) through the real command line: a named error, never a signal.
add_executable(h5_dataset_offsets ${CMAKE_CURRENT_LIST_DIR}/faults/h5_dataset_offsets.cpp)
target_link_libraries(h5_dataset_offsets PRIVATE hdf5::hdf5)
add_test(NAME faults.corrupt_inputs
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/faults/corrupt_inputs_test.sh $<TARGET_FILE:triax>
          $<TARGET_FILE:h5_dataset_offsets> ${PROJECT_SOURCE_DIR})
set_tests_properties(faults.corrupt_inputs PROPERTIES LABELS "faults;slow" TIMEOUT 900 ENVIRONMENT "OMP_NUM_THREADS=1")

# The config errors a new user meets, through the command line (exit status, file, key, line).
add_test(NAME faults.config_cli COMMAND ${CMAKE_CURRENT_LIST_DIR}/faults/config_cli_test.sh $<TARGET_FILE:triax>
  ${PROJECT_SOURCE_DIR})
set_tests_properties(faults.config_cli PROPERTIES LABELS faults TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")
