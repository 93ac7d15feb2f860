# The plugin loader's tests: small plugin libraries built for them, and plugin_registry_test.
# Included from tests/CMakeLists.txt (include(plugins.cmake)).
#
# Test libraries land under <build>/test_plugins/<case>/, never in the real plugin folder.
set(TRIAX_TEST_PLUGINS_DIR "${CMAKE_BINARY_DIR}/test_plugins")

# (a) good: an SGD-with-momentum optimizer and a sequential engine, through the SDK's macro.
triax_add_plugin(test_plugin_good SOURCES ${CMAKE_CURRENT_LIST_DIR}/plugins/good/test_plugins.cpp)
set_target_properties(test_plugin_good PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${TRIAX_TEST_PLUGINS_DIR}/good")

# (d) duplicate: the same source again, declaring the optimizer name of (a) a second time.
triax_add_plugin(test_plugin_duplicate SOURCES ${CMAKE_CURRENT_LIST_DIR}/plugins/good/test_plugins.cpp)
target_compile_definitions(test_plugin_duplicate PRIVATE TRIAX_TEST_DUPLICATE=1)
set_target_properties(test_plugin_duplicate PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${TRIAX_TEST_PLUGINS_DIR}/duplicate")

# (b, c, e, ...) hand-written manifests the loader must refuse: plain C, no SDK, no LibTorch
# (only LibTorch's version header, which is #defines).
set(triax_broken_cases wrong_abi missing_entry wrong_torch wrong_cxx_abi null_vtable unknown_kind bad_sharding)
set(triax_broken_targets "")
foreach(case IN LISTS triax_broken_cases)
  add_library(test_plugin_${case} MODULE ${CMAKE_CURRENT_LIST_DIR}/plugins/broken/broken_library.c)
  string(TOUPPER "${case}" case_upper)
  target_compile_definitions(test_plugin_${case} PRIVATE BROKEN_${case_upper}=1)
  target_include_directories(test_plugin_${case} PRIVATE
    ${PROJECT_SOURCE_DIR}/sdk/include "${TRIAX_TORCH_ROOT}/include")
  set_target_properties(test_plugin_${case} PROPERTIES PREFIX "" OUTPUT_NAME "${case}"
    C_VISIBILITY_PRESET hidden LIBRARY_OUTPUT_DIRECTORY "${TRIAX_TEST_PLUGINS_DIR}/broken"
    # Written against abi.h alone, in strict C99: proves the ABI header is plain C.
    C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(test_plugin_${case} PRIVATE -pedantic-errors)
  list(APPEND triax_broken_targets test_plugin_${case})
endforeach()

# (f) abi_1_0: an optimizer whose vtable ends where ABI 1.0's did; the loader must accept it.
add_library(test_plugin_abi_1_0 MODULE ${CMAKE_CURRENT_LIST_DIR}/plugins/abi_1_0/optimizer_abi_1_0.c)
target_include_directories(test_plugin_abi_1_0 PRIVATE ${PROJECT_SOURCE_DIR}/sdk/include "${TRIAX_TORCH_ROOT}/include")
set_target_properties(test_plugin_abi_1_0 PROPERTIES PREFIX "" OUTPUT_NAME "optimizer_abi_1_0"
  C_VISIBILITY_PRESET hidden LIBRARY_OUTPUT_DIRECTORY "${TRIAX_TEST_PLUGINS_DIR}/abi_1_0"
  C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(test_plugin_abi_1_0 PRIVATE -pedantic-errors)

# The loader alone (core/src/plugins/plugin_registry.cpp), not the whole core library.
add_executable(plugin_registry_test
  ${CMAKE_CURRENT_LIST_DIR}/plugin_registry_test.cpp
  ${PROJECT_SOURCE_DIR}/core/src/plugins/plugin_registry.cpp)
target_include_directories(plugin_registry_test PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
target_link_libraries(plugin_registry_test PRIVATE triax_sdk Boost::filesystem ${CMAKE_DL_LIBS} GTest::gtest_main)
target_compile_definitions(plugin_registry_test PRIVATE
  TRIAX_PLUGIN_INSTALL_DIR="${TRIAX_PLUGIN_INSTALL_DIR}"
  TRIAX_TEST_PLUGINS_DIR="${TRIAX_TEST_PLUGINS_DIR}")
triax_use_pch(plugin_registry_test)
add_dependencies(plugin_registry_test test_plugin_good test_plugin_duplicate test_plugin_abi_1_0 ${triax_broken_targets})
# OutOfTreePlugin.* runs only under the out_of_tree_plugin test below.
triax_discover_test_suites(plugin_registry_test DISCOVERY_TIMEOUT 60 TEST_FILTER "-OutOfTreePlugin.*")

# The SDK as plugin authors get it: install this build into a scratch prefix, build
# tests/out_of_tree_plugin (its own project, find_package(triax)) against it, and load the result.
# Needs the whole build (cmake --install), so it runs after everything is built; label "slow".
string(REPLACE ";" "|" triax_outer_prefix_path "${CMAKE_PREFIX_PATH}")
string(REPLACE ";" "|" triax_outer_launcher "${CMAKE_CXX_COMPILER_LAUNCHER}")
# What every out-of-tree driver (out_of_tree_build.cmake) needs to know of this build.
set(TRIAX_OUT_OF_TREE_ARGS
    -DTRIAX_BUILD_DIR=${CMAKE_BINARY_DIR}
    -DPREFIX_PATH=${triax_outer_prefix_path}
    -DTORCH_DIR=${TRIAX_TORCH_CMAKE_DIR}
    -DGENERATOR=${CMAKE_GENERATOR}
    -DMAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}
    -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
    -DCXX_LAUNCHER=${triax_outer_launcher})
add_test(NAME out_of_tree_plugin
  COMMAND ${CMAKE_COMMAND} ${TRIAX_OUT_OF_TREE_ARGS}
    -DSOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}/out_of_tree_plugin
    -DWORK_DIR=${CMAKE_BINARY_DIR}/test_plugins/out_of_tree
    -DCHECKER=$<TARGET_FILE:plugin_registry_test>
    -P ${CMAKE_CURRENT_LIST_DIR}/out_of_tree_plugin/run_test.cmake)
set_tests_properties(out_of_tree_plugin PROPERTIES LABELS slow TIMEOUT 900)

# Settings a model must declare support for (spectral muP, the MLP activation's recomputation):
# refused by name through the command line for the plugins that do not.
add_test(NAME plugins.capability_refusals
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/capability_refusals_test.sh $<TARGET_FILE:triax> ${CMAKE_SOURCE_DIR})
set_tests_properties(plugins.capability_refusals PROPERTIES LABELS "mup;plugins" TIMEOUT 60)

# optimizer.zero_stage refused by name: stage 2, an optimizer without a ZeRO-3 variant, a ZeRO-3
# optimizer at stage 0, and at stage 3 the moe model and a model plugin keeping its parameters whole.
add_test(NAME plugins.zero3_refusals
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/zero3_refusals_test.sh $<TARGET_FILE:triax> ${CMAKE_SOURCE_DIR}
                 ${TRIAX_TEST_PLUGINS_DIR})
set_tests_properties(plugins.zero3_refusals PROPERTIES LABELS "plugins;zero3" TIMEOUT 60)
