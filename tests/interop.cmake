# Hugging Face interop: safetensors I/O, Llama folders (config.json <-> model_config, weights),
# and cross-checks against Hugging Face's own safetensors and transformers libraries (Python, from
# the venv tools/setup.sh makes; pins there).
add_executable(safetensors_test ${CMAKE_CURRENT_LIST_DIR}/safetensors_test.cpp)
target_link_libraries(safetensors_test PRIVATE triax_core nlohmann_json::nlohmann_json GTest::gtest_main)
triax_use_pch(safetensors_test)
gtest_discover_tests(safetensors_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 60 ENVIRONMENT "OMP_NUM_THREADS=1")

# Links the llama plugin's code: names and model_config keys are checked against the plugin itself.
add_executable(hf_llama_test ${CMAKE_CURRENT_LIST_DIR}/hf_llama_test.cpp)
target_link_libraries(hf_llama_test PRIVATE triax_core triax_llama_impl GTest::gtest_main)
triax_use_pch(hf_llama_test)
gtest_discover_tests(hf_llama_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")

# The driver of the Python cross-checks (a test tool, not a user command).
add_executable(interop_tool ${CMAKE_CURRENT_LIST_DIR}/interop/interop_tool.cpp)
target_link_libraries(interop_tool PRIVATE triax_core triax_llama_impl nlohmann_json::nlohmann_json)
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

# Throughput on a SmolLM2-1.7B-shaped model against plain write()/read() (built, not run by ctest:
# `build/bin/safetensors_bench [FOLDER]`).
add_executable(safetensors_bench ${CMAKE_CURRENT_LIST_DIR}/interop/safetensors_bench.cpp)
target_link_libraries(safetensors_bench PRIVATE triax_core)
triax_use_pch(safetensors_bench)
