# Hugging Face export and import end to end against Python transformers: triax's logits equal
# transformers' (1e-4, fp32) for a model trained by triax and exported, and for a model made by
# transformers and imported (tests/interop/hf_logits_test.py). Needs the venv's transformers.
add_executable(triax_logits ${CMAKE_CURRENT_LIST_DIR}/interop/triax_logits.cpp)
target_link_libraries(triax_logits PRIVATE triax_core)
target_compile_definitions(triax_logits PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
add_dependencies(triax_logits triax_llama triax_afab triax_adamw)
triax_use_pch(triax_logits)

add_test(NAME hf_logits_match_transformers
         COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/interop/hf_logits_test.py
                 $<TARGET_FILE:triax> $<TARGET_FILE:triax_logits> ${CMAKE_SOURCE_DIR}/configs/tiny_llama.yaml
                 ${CMAKE_CURRENT_BINARY_DIR}/hf_logits)
set_tests_properties(hf_logits_match_transformers PROPERTIES LABELS "python;checkpoint" TIMEOUT 600
                     ENVIRONMENT "OMP_NUM_THREADS=1;HF_HUB_OFFLINE=1")

# The same for the mamba plugin (MambaForCausalLM), with its refusals of a Mamba-2 folder and of a
# mismatched intermediate_size (tests/interop/hf_mamba_logits_test.py).
add_dependencies(triax_logits triax_mamba)
add_test(NAME hf_mamba_logits_match_transformers
         COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/interop/hf_mamba_logits_test.py
                 $<TARGET_FILE:triax> $<TARGET_FILE:triax_logits> ${CMAKE_SOURCE_DIR}/configs/tiny_mamba.yaml
                 ${CMAKE_CURRENT_BINARY_DIR}/hf_mamba_logits)
set_tests_properties(hf_mamba_logits_match_transformers PROPERTIES LABELS "python;checkpoint;mamba" TIMEOUT 600
                     ENVIRONMENT "OMP_NUM_THREADS=1;HF_HUB_OFFLINE=1")
