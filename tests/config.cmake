# Unit tests of the configuration loader (config/). Linked with the loader's library
# alone (triax_config, and the config reader of the SDK), so that it needs neither the rest of
# libtriax_core nor LibTorch: each test process starts in milliseconds under ctest.
# Included from tests/CMakeLists.txt.
# The SDK's config reader beside triax_config, for tests that link nothing else (faults.cmake too):
# the loader's calls into the SDK without LibTorch.
set(TRIAX_CONFIG_LOADER_SOURCES
  ${PROJECT_SOURCE_DIR}/sdk/src/config_reader.cpp
  ${PROJECT_SOURCE_DIR}/sdk/src/fp8_options.cpp
  ${PROJECT_SOURCE_DIR}/sdk/src/located_yaml.cpp
  ${PROJECT_SOURCE_DIR}/sdk/src/located_yaml_writer.cpp
  ${PROJECT_SOURCE_DIR}/sdk/src/yaml_text.cpp)
add_executable(config_test
  ${CMAKE_CURRENT_LIST_DIR}/config_loading_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config_errors_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config_file_faults_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shipped_configs_test.cpp
  ${TRIAX_CONFIG_LOADER_SOURCES})
target_include_directories(config_test PRIVATE
  ${PROJECT_SOURCE_DIR}/core/include
  ${PROJECT_SOURCE_DIR}/sdk/include)
target_link_libraries(config_test PRIVATE triax_config GTest::gtest_main)
target_compile_definitions(config_test PRIVATE TRIAX_TEST_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data"
  TRIAX_CONFIGS_DIR="${PROJECT_SOURCE_DIR}/configs")
triax_discover_test_suites(config_test)

# The configuration reference against the loader, and docs/config-reference.md against both.
add_executable(config_reference_test ${CMAKE_CURRENT_LIST_DIR}/config_reference_test.cpp ${TRIAX_CONFIG_LOADER_SOURCES}
  $<TARGET_OBJECTS:triax_config_reference>)
target_include_directories(config_reference_test PRIVATE ${PROJECT_SOURCE_DIR}/core/include ${PROJECT_SOURCE_DIR}/sdk/include)
target_link_libraries(config_reference_test PRIVATE triax_config triax_data_config GTest::gtest_main)
triax_discover_test_suites(config_reference_test)
add_test(NAME config_reference.docs_current
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/config_reference_check_test.sh $<TARGET_FILE:triax>
                 ${PROJECT_SOURCE_DIR}/docs/config-reference.md)
set_tests_properties(config_reference.docs_current PROPERTIES TIMEOUT 60)

# The process mesh's rank arithmetic and the pipeline split: plain arithmetic, no LibTorch either.
add_executable(mesh_test
  ${CMAKE_CURRENT_LIST_DIR}/mesh_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pipeline_blocks_test.cpp
  ${PROJECT_SOURCE_DIR}/core/src/comm/parallel_context.cpp
  ${PROJECT_SOURCE_DIR}/core/src/step/pipeline_blocks.cpp)
target_include_directories(mesh_test PRIVATE
  ${PROJECT_SOURCE_DIR}/core/include
  ${PROJECT_SOURCE_DIR}/sdk/include)
target_link_libraries(mesh_test PRIVATE GTest::gtest_main)
triax_discover_test_suites(mesh_test)

# Durable writes (temporary name, fsync, rename, fsync of the folder): no LibTorch either.
add_executable(durable_file_test
  ${CMAKE_CURRENT_LIST_DIR}/durable_file_test.cpp
  ${PROJECT_SOURCE_DIR}/interop/src/durable_file.cpp)
target_include_directories(durable_file_test PRIVATE ${PROJECT_SOURCE_DIR}/interop/include ${PROJECT_SOURCE_DIR}/sdk/include)
target_link_libraries(durable_file_test PRIVATE GTest::gtest_main)
triax_discover_test_suites(durable_file_test)
