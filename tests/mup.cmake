# Spectral muP (model.init_method.use_mup): the scaling rules, what the llama and moe plugins
# declare through the ABI, the optimizers' per-parameter learning rates, the refusal of a plugin
# without support, learning-rate transfer across width, and parity at several topologies.
add_executable(mup_transfer_test ${CMAKE_CURRENT_LIST_DIR}/mup_transfer_test.cpp)
target_link_libraries(mup_transfer_test PRIVATE triax_core GTest::gtest_main)
target_compile_definitions(mup_transfer_test PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
add_dependencies(mup_transfer_test triax_llama triax_afab triax_adamw)
triax_use_pch(mup_transfer_test)
add_test(NAME mup.transfer COMMAND mup_transfer_test)
set_tests_properties(mup.transfer PROPERTIES LABELS "mup;slow" ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 600)

target_sources(core_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/mup_test.cpp)  # tests/core_test.cmake
add_dependencies(core_test triax_llama triax_moe triax_mamba triax_adamw triax_zero1_adamw)
triax_add_area_suites(core_test SUITES SpectralMupModels.* SpectralMupOptimizers.* SpectralMupRefusals.* SpectralMupRule.*
                      PROPERTIES LABELS mup ENVIRONMENT "OMP_NUM_THREADS=1")

# Parity (after parity.cmake, whose parity_runner and run_case.sh these use): the tiny Llama of
# the parity matrix with spectral muP and untied embeddings (so that the vocabulary-parallel head
# carries its own learning-rate scale, from the global vocabulary), 10 steps in fp32 at dp 2 with
# ZeRO-1, tp 2 in both modes, pp 2 (1f1b) and dp 2 x tp 2 x pp 2; losses, gradient norms and
# final parameters within 1e-5 relative of the single-rank muP run.
set(MUP_PARITY_DIR ${CMAKE_CURRENT_BINARY_DIR}/mup_parity)
set(MUP_SETTINGS --set "model.init_method={use_mup: true}" --set model.model_config.tie_word_embeddings=false)
triax_config_parity_reference(mup_parity.reference LABELS mup parity CONFIG ${PARITY_CONFIG}
                              OUT ${MUP_PARITY_DIR}/reference FIXTURE mup_parity_reference ${MUP_SETTINGS})

function(triax_mup_parity_case name)
  triax_config_parity_case(mup_parity.${name} CONFIG ${PARITY_CONFIG} REFERENCE ${MUP_PARITY_DIR}/reference
                           FIXTURE mup_parity_reference LABELS mup parity multi_rank ${ARGN} ${MUP_SETTINGS})
endfunction()

triax_mup_parity_case(dp2_zero1            DP 2 TP 1 PP 1 ENGINE afab ZERO 1 MODE ALL_REDUCE)
triax_mup_parity_case(tp2                  DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_mup_parity_case(tp2_sp               DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE REDUCE_SCATTER)
triax_mup_parity_case(pp2_1f1b             DP 1 TP 1 PP 2 ENGINE 1f1b ZERO 0 MODE ALL_REDUCE)
triax_mup_parity_case(dp2_tp2_pp2_sp_1f1b  DP 2 TP 2 PP 2 ENGINE 1f1b ZERO 1 MODE REDUCE_SCATTER)

