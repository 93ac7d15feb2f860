# The qwen2 model plugin (plugins/models/qwen2): nanotron's Qwen2 example configs through `triax
# train --check` and its refusals naming the key; whole runs of parity/tiny_qwen2_parity.yaml (q/k/v
# biases, NoPE layers, GPT-J rotary pairs, z-loss) at tp 2, pp 2 (1F1B) and dp 2 x tp 2 x pp 2 with
# sequence parallelism against the single-rank run (losses, gradient norms, final parameters and
# the z-loss within 1e-5, fp32 on CPU); Qwen2ForCausalLM and SmolLM3ForCausalLM both ways against
# transformers. Label: qwen2.
add_dependencies(parity_runner triax_qwen2)
add_dependencies(triax_logits triax_qwen2)

add_test(NAME qwen2.configs_and_refusals
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/qwen2_configs_test.sh $<TARGET_FILE:triax> ${CMAKE_SOURCE_DIR})
set_tests_properties(qwen2.configs_and_refusals PROPERTIES LABELS "cli;qwen2" TIMEOUT 120)

set(QWEN2_PARITY_CONFIG ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_qwen2_parity.yaml)
set(QWEN2_PARITY_DIR ${CMAKE_CURRENT_BINARY_DIR}/qwen2_parity)
add_test(NAME qwen2_parity.reference
         COMMAND parity_runner run --config ${QWEN2_PARITY_CONFIG} --out ${QWEN2_PARITY_DIR}/reference
                 --set checkpoints.checkpoints_path=${QWEN2_PARITY_DIR}/reference/run)
set_tests_properties(qwen2_parity.reference PROPERTIES FIXTURES_SETUP qwen2_parity_reference
                     LABELS "parity;qwen2" ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120)
# The reference logs the z-loss by name (the cases then compare it step by step).
add_test(NAME qwen2_parity.reference_logs_z_loss
         COMMAND grep -q "\"z_loss\"" ${QWEN2_PARITY_DIR}/reference/run/metrics.jsonl)
set_tests_properties(qwen2_parity.reference_logs_z_loss PROPERTIES FIXTURES_REQUIRED qwen2_parity_reference
                     LABELS "parity;qwen2")

# triax_qwen2_parity_case(<name> DP d TP t PP p ENGINE afab|1f1b MODE ALL_REDUCE|REDUCE_SCATTER [ZERO 0|1|3])
function(triax_qwen2_parity_case name)
  cmake_parse_arguments(ARG "" "DP;TP;PP;ENGINE;MODE;ZERO" "" ${ARGN})
  if(NOT ARG_ZERO)
    set(ARG_ZERO 0)
  endif()
  math(EXPR ranks "${ARG_DP} * ${ARG_TP} * ${ARG_PP}")
  math(EXPR accumulation "8 / ${ARG_DP}")
  add_test(NAME qwen2_parity.${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/parity/moe_case.sh ${TRIAX_TEST_PYTHON} $<TARGET_FILE:parity_runner>
                   ${MPIEXEC_EXECUTABLE} ${QWEN2_PARITY_CONFIG} ${QWEN2_PARITY_DIR}/reference ${QWEN2_PARITY_DIR}/${name}
                   ${ranks} --set parallelism.dp=${ARG_DP} --set parallelism.tp=${ARG_TP} --set parallelism.pp=${ARG_PP}
                   --set parallelism.pp_engine=${ARG_ENGINE} --set parallelism.tp_mode=${ARG_MODE}
                   --set tokens.batch_accumulation_per_replica=${accumulation} --set optimizer.zero_stage=${ARG_ZERO})
  set_tests_properties(qwen2_parity.${name} PROPERTIES FIXTURES_REQUIRED qwen2_parity_reference
                       LABELS "parity;multi_rank;qwen2" PROCESSORS ${ranks} TIMEOUT 300)
endfunction()
triax_qwen2_parity_case(tp2                 DP 1 TP 2 PP 1 ENGINE afab MODE ALL_REDUCE)
triax_qwen2_parity_case(pp2_1f1b            DP 1 TP 1 PP 2 ENGINE 1f1b MODE ALL_REDUCE)
triax_qwen2_parity_case(dp2_tp2_pp2_sp_1f1b DP 2 TP 2 PP 2 ENGINE 1f1b MODE REDUCE_SCATTER)
# ZeRO-3 (docs/zero3.md): the z-loss leaves the head's block as a second output.
triax_qwen2_parity_case(dp2_zero3           DP 2 TP 1 PP 1 ENGINE afab MODE ALL_REDUCE ZERO 3)

# Hugging Face: Qwen2ForCausalLM and SmolLM3ForCausalLM exported and imported, logits against transformers.
triax_hf_logits_test(qwen2.hf_logits_match_transformers hf_qwen2_logits_test.py
                     tiny_qwen2.yaml hf_qwen2_logits "python;checkpoint;qwen2")

# The model and the SDK features it turns on, in one process (tests/qwen2_test.cpp).
add_executable(qwen2_test ${CMAKE_CURRENT_LIST_DIR}/qwen2_test.cpp)
target_link_libraries(qwen2_test PRIVATE triax_qwen2_impl triax_llama_impl GTest::gtest_main)
target_compile_definitions(qwen2_test PRIVATE TRIAX_TEST_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data")
triax_use_pch(qwen2_test)
triax_discover_test_suites(qwen2_test PROPERTIES LABELS qwen2)
