# Hugging Face interop: safetensors I/O, the tensor-map engine, model plugin choice by marker or
# architecture, the llama plugin's mapping (config.json <-> model_config, weights), and
# cross-checks against Hugging Face's own safetensors and transformers libraries (Python, from the
# venv tools/setup.sh makes; pins there).
# safetensors I/O and the tensor-map engine: one program, so LibTorch's headers are compiled once.
add_executable(safetensors_test ${CMAKE_CURRENT_LIST_DIR}/safetensors_test.cpp ${CMAKE_CURRENT_LIST_DIR}/tensor_map_test.cpp)
target_link_libraries(safetensors_test PRIVATE triax_interop nlohmann_json::nlohmann_json GTest::gtest_main)
triax_use_pch(safetensors_test)
triax_discover_test_suites(safetensors_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 60 ENVIRONMENT "OMP_NUM_THREADS=1")

# Model plugins that only declare nanotron markers (no Hugging Face mapping), plain C.
add_library(test_plugin_model_markers MODULE ${CMAKE_CURRENT_LIST_DIR}/plugins/model_markers/model_markers.c)
target_include_directories(test_plugin_model_markers PRIVATE
  ${PROJECT_SOURCE_DIR}/sdk/include "${TRIAX_TORCH_ROOT}/include")
set_target_properties(test_plugin_model_markers PROPERTIES PREFIX "" OUTPUT_NAME "model_markers"
  C_VISIBILITY_PRESET hidden LIBRARY_OUTPUT_DIRECTORY "${TRIAX_TEST_PLUGINS_DIR}/model_markers"
  C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)

# These load the build's plugins (the llama plugin's mapping, through the ABI as the host uses it).
foreach(test model_selection_test hf_llama_test)
  add_executable(${test} ${CMAKE_CURRENT_LIST_DIR}/${test}.cpp)
  target_link_libraries(${test} PRIVATE triax_convert triax_core nlohmann_json::nlohmann_json GTest::gtest_main)
  target_compile_definitions(${test} PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}"
                                             TRIAX_TEST_PLUGINS_DIR="${TRIAX_TEST_PLUGINS_DIR}")
  add_dependencies(${test} triax_llama triax_mamba triax_moe triax_qwen2 test_plugin_model_markers)
  triax_use_pch(${test})
  triax_discover_test_suites(${test} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")
endforeach()
# The plugin's own parameter table is compared with its tensor map.
target_link_libraries(hf_llama_test PRIVATE triax_llama_impl)

# The driver of the Python cross-checks (a test tool, not a user command).
add_executable(interop_tool ${CMAKE_CURRENT_LIST_DIR}/interop/interop_tool.cpp)
target_link_libraries(interop_tool PRIVATE triax_convert triax_core nlohmann_json::nlohmann_json)
target_compile_definitions(interop_tool PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
add_dependencies(interop_tool triax_llama)
triax_use_pch(interop_tool)

set(TRIAX_TEST_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python")
# Files triax writes load in safetensors.torch bit for bit; files it writes read equal in triax.
add_test(NAME interop_safetensors_compat
  COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/interop/safetensors_compat.py $<TARGET_FILE:interop_tool>)
# transformers' LlamaForCausalLM folders read into triax and triax's exports load in transformers.
add_test(NAME interop_hf_llama_compat
  COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/interop/hf_llama_compat.py $<TARGET_FILE:interop_tool>)
set_tests_properties(interop_safetensors_compat interop_hf_llama_compat PROPERTIES
  TIMEOUT 300 LABELS python ENVIRONMENT "OMP_NUM_THREADS=1")

# The command line without model.plugin: a nanotron config trains, `triax convert` both ways, a
# run whose model_config comes from a Hugging Face folder's config.json, and the refusals.
add_test(NAME hf_cli COMMAND ${CMAKE_CURRENT_LIST_DIR}/hf_cli_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR}
                             ${TRIAX_TEST_PLUGINS_DIR}/model_markers)
set_tests_properties(hf_cli PROPERTIES TIMEOUT 300 LABELS checkpoint ENVIRONMENT "OMP_NUM_THREADS=1")

# `triax convert` there and back for every model plugin with a Hugging Face mapping (the list in
# the script): triax -> HF -> triax and HF -> triax -> HF (from triax's export and from a folder
# transformers wrote) give the same tensors bit for bit.
add_dependencies(interop_tool triax_mamba triax_mamba2 triax_moe)
add_test(NAME hf_convert_round_trips
  COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/interop/convert_round_trip_test.py $<TARGET_FILE:triax>
          $<TARGET_FILE:interop_tool> ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/convert_round_trips)
set_tests_properties(hf_convert_round_trips PROPERTIES TIMEOUT 300 LABELS "python;checkpoint"
                     ENVIRONMENT "OMP_NUM_THREADS=1;HF_HUB_OFFLINE=1")

# Throughput on a SmolLM2-1.7B-shaped model against plain write()/read() (not run by ctest, built by
# the triax_benches target: `build/bin/safetensors_bench [FOLDER]`).
add_executable(safetensors_bench EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/interop/safetensors_bench.cpp)
add_dependencies(triax_benches safetensors_bench)
target_link_libraries(safetensors_bench PRIVATE triax_convert triax_core)
target_compile_definitions(safetensors_bench PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
add_dependencies(safetensors_bench triax_llama)
triax_use_pch(safetensors_bench)
