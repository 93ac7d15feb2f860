# The qwen3 and qwen3_moe model plugins (plugins/models/qwen3, plugins/models/qwen3_moe): the tiny
# CPU configs train, the refusals name their key, and whole runs of parity/tiny_qwen3_parity.yaml
# (qk-norm over heads that tp splits, head_dim of its own, biases on all four projections, z-loss;
# at tp 2, pp 2, dp 2 x tp 2 x pp 2, ZeRO-3 and cp 2) and parity/tiny_qwen3_moe_parity.yaml (8
# experts, top-2 renormalised, no shared expert; at ep 2 alone, with tp 2 and with pp 2) against
# the single-rank run: losses, gradient norms, final parameters and every named auxiliary loss
# within 1e-5 (fp32, CPU); Qwen3ForCausalLM and Qwen3MoeForCausalLM both ways against transformers.
# Label: qwen3.
add_dependencies(parity_runner triax_qwen3 triax_qwen3_moe)
add_dependencies(triax_logits triax_qwen3 triax_qwen3_moe)

add_test(NAME qwen3.tiny_configs_train
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/qwen3_tiny_configs_test.sh $<TARGET_FILE:triax> ${CMAKE_SOURCE_DIR})
set_tests_properties(qwen3.tiny_configs_train PROPERTIES LABELS "cli;qwen3" TIMEOUT 180)
add_test(NAME qwen3.bad_input COMMAND ${CMAKE_CURRENT_LIST_DIR}/qwen3_bad_input_test.sh $<TARGET_FILE:triax>
                                      ${CMAKE_SOURCE_DIR})
set_tests_properties(qwen3.bad_input PROPERTIES LABELS "cli;qwen3" TIMEOUT 120)

# triax_qwen3_reference(<model> <config>): the single-rank reference of qwen3_<model>'s cases.
function(triax_qwen3_reference model config)
  add_test(NAME ${model}_parity.reference
           COMMAND parity_runner run --config ${config} --out ${CMAKE_CURRENT_BINARY_DIR}/${model}_parity/reference
                   --set checkpoints.checkpoints_path=${CMAKE_CURRENT_BINARY_DIR}/${model}_parity/reference/run)
  set_tests_properties(${model}_parity.reference PROPERTIES FIXTURES_SETUP ${model}_parity_reference
                       LABELS "parity;qwen3" ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120)
endfunction()
# triax_qwen3_parity_case(<model> <config> <name> RANKS n [--set ...]...)
function(triax_qwen3_parity_case model config name)
  cmake_parse_arguments(ARG "" "RANKS" "" ${ARGN})
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${model}_parity)
  add_test(NAME ${model}_parity.${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/parity/moe_case.sh ${TRIAX_TEST_PYTHON} $<TARGET_FILE:parity_runner>
                   ${MPIEXEC_EXECUTABLE} ${config} ${dir}/reference ${dir}/${name} ${ARG_RANKS} ${ARG_UNPARSED_ARGUMENTS})
  set_tests_properties(${model}_parity.${name} PROPERTIES FIXTURES_REQUIRED ${model}_parity_reference
                       LABELS "parity;multi_rank;qwen3" PROCESSORS ${ARG_RANKS} TIMEOUT 300)
endfunction()

set(QWEN3_PARITY_CONFIG ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_qwen3_parity.yaml)
triax_qwen3_reference(qwen3 ${QWEN3_PARITY_CONFIG})
triax_qwen3_parity_case(qwen3 ${QWEN3_PARITY_CONFIG} tp2 RANKS 2 --set parallelism.tp=2)
triax_qwen3_parity_case(qwen3 ${QWEN3_PARITY_CONFIG} tp2_sequence_parallel RANKS 2 --set parallelism.tp=2
                        --set parallelism.tp_mode=REDUCE_SCATTER)
triax_qwen3_parity_case(qwen3 ${QWEN3_PARITY_CONFIG} pp2_1f1b RANKS 2 --set parallelism.pp=2
                        --set parallelism.pp_engine=1f1b)
triax_qwen3_parity_case(qwen3 ${QWEN3_PARITY_CONFIG} dp2_tp2_pp2_sp_1f1b RANKS 8 --set parallelism.dp=2
                        --set parallelism.tp=2 --set parallelism.pp=2 --set parallelism.pp_engine=1f1b
                        --set parallelism.tp_mode=REDUCE_SCATTER --set tokens.batch_accumulation_per_replica=4)
# ZeRO-3 gathers q_norm and k_norm with the rest of each layer; context parallelism normalises
# each rank's share of the sequence (K/V all-gathered, or passed around a ring).
triax_qwen3_parity_case(qwen3 ${QWEN3_PARITY_CONFIG} dp2_zero3 RANKS 2 --set parallelism.dp=2
                        --set optimizer.zero_stage=3 --set tokens.batch_accumulation_per_replica=4)
triax_qwen3_parity_case(qwen3 ${QWEN3_PARITY_CONFIG} cp2 RANKS 2 --set parallelism.context_parallel_size=2)
triax_qwen3_parity_case(qwen3 ${QWEN3_PARITY_CONFIG} cp2_ring RANKS 2 --set parallelism.context_parallel_size=2
                        --set parallelism.context_parallel_attention=ring)

set(QWEN3_MOE_PARITY_CONFIG ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_qwen3_moe_parity.yaml)
set(EP2 --set parallelism.dp=2 --set parallelism.expert_parallel_size=2 --set tokens.batch_accumulation_per_replica=4)
triax_qwen3_reference(qwen3_moe ${QWEN3_MOE_PARITY_CONFIG})
triax_qwen3_parity_case(qwen3_moe ${QWEN3_MOE_PARITY_CONFIG} dp2_ep2 RANKS 2 ${EP2})
triax_qwen3_parity_case(qwen3_moe ${QWEN3_MOE_PARITY_CONFIG} dp2_ep2_tp2 RANKS 4 ${EP2} --set parallelism.tp=2)
triax_qwen3_parity_case(qwen3_moe ${QWEN3_MOE_PARITY_CONFIG} dp2_ep2_pp2_1f1b RANKS 4 ${EP2} --set parallelism.pp=2
                        --set parallelism.pp_engine=1f1b)

# Hugging Face: Qwen3ForCausalLM and Qwen3MoeForCausalLM exported and imported, logits against
# transformers, and the refusals of missing qk-norm weights and an odd head_dim.
triax_hf_logits_test(qwen3.hf_logits_match_transformers hf_qwen3_logits_test.py
                     tiny_qwen3.yaml hf_qwen3_logits "python;checkpoint;qwen3")
