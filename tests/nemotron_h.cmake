# The nemotron_h model plugin (included from tests/CMakeLists.txt after mamba2.cmake): config and
# bad input, the tensor map, the generation cache and recomputation (nemotron_h_test, linking the
# model code directly), the demo run, logits and generation against transformers, and the parity
# matrix.
add_executable(nemotron_h_test ${CMAKE_CURRENT_LIST_DIR}/nemotron_h_test.cpp)
target_link_libraries(nemotron_h_test PRIVATE triax_nemotron_h_impl GTest::gtest_main)
triax_use_pch(nemotron_h_test)
triax_discover_test_suites(nemotron_h_test PROPERTIES LABELS nemotron_h)

# The demo config trains with the triax command and its loss falls (tests/mamba2_training_test.py).
add_test(NAME nemotron_h_demo_trains
         COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/mamba2_training_test.py $<TARGET_FILE:triax>
                 ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/nemotron_h_demo tiny_nemotron_h.yaml nemotron_h
                 "hybrid_override_pattern: M-M*E")
set_tests_properties(nemotron_h_demo_trains PROPERTIES LABELS "python;nemotron_h" TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")

# Export and import against transformers' NemotronHForCausalLM (fp32 CPU, <= 1e-4), the round
# trips bit-identical, greedy generation equal to transformers' generate(), and the refusals of
# bad config.json (tests/interop/hf_nemotron_h_test.py).
add_dependencies(triax_logits triax_nemotron_h)
triax_hf_logits_test(hf_nemotron_h_logits_match_transformers hf_nemotron_h_test.py
                     tiny_nemotron_h.yaml hf_nemotron_h "python;checkpoint;nemotron_h")

# The parity matrix of the tiny hybrid of parity/tiny_nemotron_h_parity.yaml (pattern "M*-M", split
# by cost across the pp 2 stages), trained 10 steps in fp32 on real
# processes at tp 2 (one group of Mamba heads, one K/V head per rank), pp 2, dp 2 with ZeRO-1 and
# with per-layer recomputation; losses, gradient norms and final parameters within 1e-5 relative
# of the single-rank run's.
set(NEMOTRON_H_PARITY_CONFIG ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_nemotron_h_parity.yaml)
triax_model_parity_reference(nemotron_h_parity PLUGIN triax_nemotron_h CONFIG ${NEMOTRON_H_PARITY_CONFIG}
                             LABEL nemotron_h)

function(triax_nemotron_h_parity_case name)
  triax_model_parity_case(nemotron_h_parity ${name} CONFIG ${NEMOTRON_H_PARITY_CONFIG} LABEL nemotron_h ${ARGN})
endfunction()

triax_nemotron_h_parity_case(tp2           DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_nemotron_h_parity_case(tp2_sp        DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE REDUCE_SCATTER)
triax_nemotron_h_parity_case(pp2_1f1b      DP 1 TP 1 PP 2 ENGINE 1f1b ZERO 0 MODE ALL_REDUCE)
triax_nemotron_h_parity_case(dp2_zero1     DP 2 TP 1 PP 1 ENGINE afab ZERO 1 MODE ALL_REDUCE)
triax_nemotron_h_parity_case(pp2_recompute DP 1 TP 1 PP 2 ENGINE 1f1b ZERO 0 MODE ALL_REDUCE
                             --set parallelism.recompute_layer=true)

# The same model with E layers (pattern "ME*E": 4 experts of the shared MoE block, 2 per token from
# the best of 2 groups, a shared expert) against its own single-rank run at dp 2 = ep 2, tp 2
# (sequence parallel) and pp 2: losses, gradient norms, final parameters and the router's named
# losses within 1e-5.
set(NEMOTRON_H_MOE_SETTINGS
    --set model.model_config.hybrid_override_pattern=ME*E --set model.model_config.n_routed_experts=4
    --set model.model_config.num_experts_per_tok=2 --set model.model_config.moe_intermediate_size=24
    --set model.model_config.moe_shared_expert_intermediate_size=40 --set model.model_config.n_group=2
    --set model.model_config.topk_group=2 --set model.model_config.routed_scaling_factor=1.5
    --set model.model_config.router_z_loss_coef=0.001)
set(NEMOTRON_H_MOE_REFERENCE ${CMAKE_CURRENT_BINARY_DIR}/nemotron_h_moe_parity/reference)
triax_config_parity_reference(nemotron_h_moe_parity.reference LABELS parity nemotron_h
                              CONFIG ${NEMOTRON_H_PARITY_CONFIG} OUT ${NEMOTRON_H_MOE_REFERENCE}
                              FIXTURE nemotron_h_moe_parity_reference ${NEMOTRON_H_MOE_SETTINGS})

function(triax_nemotron_h_moe_parity_case name)
  triax_config_parity_case(nemotron_h_moe_parity.${name} CONFIG ${NEMOTRON_H_PARITY_CONFIG}
                           REFERENCE ${NEMOTRON_H_MOE_REFERENCE} FIXTURE nemotron_h_moe_parity_reference
                           LABELS parity multi_rank nemotron_h AUX_LOSSES ${ARGN} ${NEMOTRON_H_MOE_SETTINGS})
endfunction()

triax_nemotron_h_moe_parity_case(dp2_ep2  DP 2 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE
                                 --set parallelism.expert_parallel_size=2)
triax_nemotron_h_moe_parity_case(tp2_sp   DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE REDUCE_SCATTER)
triax_nemotron_h_moe_parity_case(pp2_1f1b DP 1 TP 1 PP 2 ENGINE 1f1b ZERO 0 MODE ALL_REDUCE)
