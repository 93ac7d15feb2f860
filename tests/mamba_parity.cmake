# The Mamba parity matrix (included after parity.cmake, whose parity_runner and run_case.sh it
# uses): the tiny Mamba of parity/tiny_mamba_parity.yaml trained 10 steps in fp32 on real processes
# (mpirun) at tp 2 in both tp modes, pp 2 with both engines (the fp32 residual crossing the stage
# boundary), dp 2 with ZeRO-1, tp 2 x pp 2 x dp 2, and tp 2 with per-layer recomputation; losses, gradient norms and final parameters within 1e-5 relative of the
# single-rank run's, as the Llama matrix.
set(MAMBA_PARITY_CONFIG ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_mamba_parity.yaml)
triax_model_parity_reference(mamba_parity PLUGIN triax_mamba CONFIG ${MAMBA_PARITY_CONFIG} LABEL mamba)

# triax_mamba_parity_case(<name> DP d TP t PP p ENGINE afab|1f1b ZERO 0|1|3 MODE ALL_REDUCE|REDUCE_SCATTER
#                         [--set ...]...)
function(triax_mamba_parity_case name)
  triax_model_parity_case(mamba_parity ${name} CONFIG ${MAMBA_PARITY_CONFIG} LABEL mamba ${ARGN})
endfunction()

triax_mamba_parity_case(tp2                  DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_mamba_parity_case(tp2_sp               DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE REDUCE_SCATTER)
triax_mamba_parity_case(pp2_afab             DP 1 TP 1 PP 2 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_mamba_parity_case(pp2_1f1b             DP 1 TP 1 PP 2 ENGINE 1f1b ZERO 0 MODE ALL_REDUCE)
triax_mamba_parity_case(dp2_zero1            DP 2 TP 1 PP 1 ENGINE afab ZERO 1 MODE ALL_REDUCE)
# ZeRO-3 (docs/zero3.md): the mixer's scan and convolution run again in each block's backward.
triax_mamba_parity_case(dp2_zero3            DP 2 TP 1 PP 1 ENGINE afab ZERO 3 MODE ALL_REDUCE)
triax_mamba_parity_case(dp2_tp2_pp2_sp_1f1b  DP 2 TP 2 PP 2 ENGINE 1f1b ZERO 1 MODE REDUCE_SCATTER)
# Per-layer recomputation with tp 2: the layer's collectives run again in backward (one rank:
# mamba_test's MambaModel.RecomputationChangesNothing).
triax_mamba_parity_case(tp2_recompute        DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE
                        --set parallelism.recompute_layer=true)
# mamba_inner() (TRIAX_MAMBA_RECOMPUTE_CONV=1: u and delta formed again in the backward, x_proj's
# output gradient all-reduced over tp inside it) at tp 2 in both modes, against the reference run
# without it.
triax_mamba_parity_case(tp2_inner            DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_mamba_parity_case(tp2_sp_inner         DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE REDUCE_SCATTER)
set_tests_properties(mamba_parity.tp2_inner mamba_parity.tp2_sp_inner PROPERTIES ENVIRONMENT TRIAX_MAMBA_RECOMPUTE_CONV=1)

# Mixed precision on the GPU (tests/gpu/bf16_follows_fp32.sh, as the Llama's gpu_bf16_follows_cpu_fp32):
# 50 bf16 steps of the tiny Mamba through the fused scan and conv kernels follow the fp32 CPU run,
# every step's loss within 2% relative; again with mamba_inner().
if(TRIAX_CUDA)
  add_test(NAME gpu_bf16_mamba_follows_cpu_fp32
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/gpu/bf16_follows_fp32.sh $<TARGET_FILE:parity_runner> ${MAMBA_PARITY_CONFIG}
                   ${CMAKE_CURRENT_BINARY_DIR}/bf16_mamba_follows_fp32)
  add_test(NAME gpu_bf16_mamba_inner_follows_cpu_fp32
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/gpu/bf16_follows_fp32.sh $<TARGET_FILE:parity_runner> ${MAMBA_PARITY_CONFIG}
                   ${CMAKE_CURRENT_BINARY_DIR}/bf16_mamba_inner_follows_fp32)
  set_tests_properties(gpu_bf16_mamba_follows_cpu_fp32 gpu_bf16_mamba_inner_follows_cpu_fp32 PROPERTIES LABELS gpu
                       TIMEOUT 300)
  set_tests_properties(gpu_bf16_mamba_inner_follows_cpu_fp32 PROPERTIES ENVIRONMENT TRIAX_MAMBA_RECOMPUTE_CONV=1)
endif()
