# Hugging Face export and import end to end against Python transformers: triax's logits equal
# transformers' (1e-4, fp32) for a model trained by triax and exported, and for a model made by
# transformers and imported (tests/interop/hf_logits_test.py). Needs the venv's transformers.
add_executable(triax_logits ${CMAKE_CURRENT_LIST_DIR}/interop/triax_logits.cpp)
target_link_libraries(triax_logits PRIVATE triax_convert triax_core)
target_compile_definitions(triax_logits PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
add_dependencies(triax_logits triax_llama triax_afab triax_adamw)
triax_use_pch(triax_logits)

# NAME runs tests/interop/SCRIPT TRIAX TRIAX_LOGITS configs/CONFIG WORK_DIR (a python script
# against transformers, offline, one thread), labelled LABELS.
function(triax_hf_logits_test name script config work labels)
  add_test(NAME ${name}
           COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/interop/${script}
                   $<TARGET_FILE:triax> $<TARGET_FILE:triax_logits> ${CMAKE_SOURCE_DIR}/configs/${config}
                   ${CMAKE_CURRENT_BINARY_DIR}/${work})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 600
                       ENVIRONMENT "OMP_NUM_THREADS=1;HF_HUB_OFFLINE=1")
endfunction()

triax_hf_logits_test(hf_logits_match_transformers hf_logits_test.py
                     tiny_llama.yaml hf_logits "python;checkpoint")

# The same for the mamba plugin (MambaForCausalLM), with the refusals of a Mamba-2 folder (by the
# mamba2 plugin, and by the mamba plugin when named) and of a mismatched intermediate_size
# (tests/interop/hf_mamba_logits_test.py).
add_dependencies(triax_logits triax_mamba triax_mamba2)
triax_hf_logits_test(hf_mamba_logits_match_transformers hf_mamba_logits_test.py
                     tiny_mamba.yaml hf_mamba_logits "python;checkpoint;mamba")

# The same for the mamba2 plugin (Mamba2ForCausalLM), with its refusals of groups that do not
# divide the heads, heads that do not fill the mixer and chunk_size 0
# (tests/interop/hf_mamba2_logits_test.py).
triax_hf_logits_test(hf_mamba2_logits_match_transformers hf_mamba2_logits_test.py
                     tiny_mamba2.yaml hf_mamba2_logits "python;checkpoint;mamba2")
