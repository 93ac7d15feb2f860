# The mamba2 model plugin's unit tests (included from tests/CMakeLists.txt): the chunked SSD
# against the sequential scan (fp64, gradients, fp32 and bf16 tolerances), what one layer's forward
# keeps for the backward, the gated norm's autograd function against its composition (and its
# CUDA kernels, with a GPU), config and bad input, initialisation, logits against an independent
# reference, recomputation, the Hugging Face mapping, and the copies, fills and adds of one mixer's
# training step (mamba2_op_count_test.cpp), the token-major causal conv1d (its CUDA kernels
# with a GPU), the SSD backward's fused passes against their composition (with a GPU) and the block
# with TRIAX_MAMBA_BLOCK_NORM_FUSED=1 against it off (mamba2_block_norm_test.cpp), and the fused chunk scan's
# third forward kernel against the second (with a GPU; mamba2_chunk_scan_v3_test.cpp), the chunk states' tensor-core
# kernels against cuBLAS's products (with a GPU; mamba2_chunk_states_test.cpp), and in_proj's gradient landed in
# one tensor against the split's cat (mamba2_in_proj_gradient_test.cpp). They link the model code directly
# (triax_mamba2_impl).
add_executable(mamba2_test ${CMAKE_CURRENT_LIST_DIR}/mamba2_ssd_test.cpp ${CMAKE_CURRENT_LIST_DIR}/mamba2_saved_bytes_test.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/mamba2_gated_norm_test.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/mamba2_config_test.cpp ${CMAKE_CURRENT_LIST_DIR}/mamba2_model_test.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/mamba2_cache_test.cpp ${CMAKE_CURRENT_LIST_DIR}/mamba2_op_count_test.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/mamba2_token_major_conv_test.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/mamba2_ssd_backward_fused_test.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/mamba2_ssd_packed_test.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/mamba2_block_norm_test.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/mamba2_chunk_scan_v3_test.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/mamba2_chunk_states_test.cpp
                           ${CMAKE_CURRENT_LIST_DIR}/mamba2_in_proj_gradient_test.cpp)
target_link_libraries(mamba2_test PRIVATE triax_mamba2_impl GTest::gtest_main)
triax_use_pch(mamba2_test)
triax_discover_test_suites(mamba2_test TEST_FILTER "-*Cuda.*" TEST_LIST mamba2_test_cpu PROPERTIES LABELS mamba2)
# The SSD on CUDA against the CPU's fp64 (skipped without a GPU).
triax_discover_test_suites(mamba2_test TEST_FILTER "*Cuda.*" TEST_LIST mamba2_test_cuda PROPERTIES LABELS "gpu;mamba2")

# The demo config trains with the triax command and its loss falls (tests/mamba2_training_test.py).
add_test(NAME mamba2_demo_trains
         COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/mamba2_training_test.py $<TARGET_FILE:triax>
                 ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/mamba2_demo)
set_tests_properties(mamba2_demo_trains PROPERTIES LABELS "python;mamba2" TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")

# The Mamba-2 parity matrix (after parity.cmake, whose parity_runner and run_case.sh it uses): the
# tiny Mamba-2 of parity/tiny_mamba2_parity.yaml trained 10 steps in fp32 on real processes
# (mpirun) at pp 2 with both engines (the fp32 residual crossing the stage boundary), with
# per-layer recomputation, at dp 2 with ZeRO-1 and ZeRO-3, at tp 2 (one group of heads per rank)
# in both tp modes and at dp 2 x tp 2 x pp 2; losses, gradient norms and final parameters within
# 1e-5 relative of the single-rank run's.
set(MAMBA2_PARITY_CONFIG ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_mamba2_parity.yaml)
triax_model_parity_reference(mamba2_parity PLUGIN triax_mamba2 CONFIG ${MAMBA2_PARITY_CONFIG} LABEL mamba2)

function(triax_mamba2_parity_case name)
  triax_model_parity_case(mamba2_parity ${name} CONFIG ${MAMBA2_PARITY_CONFIG} LABEL mamba2 ${ARGN})
endfunction()

triax_mamba2_parity_case(pp2_afab       DP 1 TP 1 PP 2 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_mamba2_parity_case(pp2_1f1b       DP 1 TP 1 PP 2 ENGINE 1f1b ZERO 0 MODE ALL_REDUCE)
triax_mamba2_parity_case(pp2_recompute  DP 1 TP 1 PP 2 ENGINE 1f1b ZERO 0 MODE ALL_REDUCE
                         --set parallelism.recompute_layer=true)
triax_mamba2_parity_case(dp2_zero1      DP 2 TP 1 PP 1 ENGINE afab ZERO 1 MODE ALL_REDUCE)
# ZeRO-3 (docs/zero3.md): the mixer's scan and convolution run again in each block's backward.
triax_mamba2_parity_case(dp2_zero3      DP 2 TP 1 PP 1 ENGINE afab ZERO 3 MODE ALL_REDUCE)
triax_mamba2_parity_case(dp2_pp2_1f1b   DP 2 TP 1 PP 2 ENGINE 1f1b ZERO 1 MODE ALL_REDUCE)
triax_mamba2_parity_case(tp2            DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_mamba2_parity_case(tp2_sp         DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE REDUCE_SCATTER)
triax_mamba2_parity_case(dp2_tp2_pp2_sp DP 2 TP 2 PP 2 ENGINE 1f1b ZERO 1 MODE REDUCE_SCATTER)

# Checkpoints across tp (checkpoint_topology.cmake's cases on the Mamba-2 config): a tp 2 run in
# sequence-parallel mode saves at step 5 (each rank its groups of in_proj and conv1d); the single
# rank resumes from it, and tp 2 resumes from a single-rank save, each finishing within 1e-5 of the
# uninterrupted single-rank run.
set(MAMBA2_CHECKPOINT PREFIX mamba2_checkpoint DIR ${CMAKE_CURRENT_BINARY_DIR}/mamba2_checkpoint
    REFERENCE ${CMAKE_CURRENT_BINARY_DIR}/mamba2_parity/reference FIXTURE mamba2_parity_reference LABEL mamba2
    CONFIG ${MAMBA2_PARITY_CONFIG})
set(MAMBA2_TP2_SP --set parallelism.tp=2 --set parallelism.tp_mode=REDUCE_SCATTER)
triax_checkpoint_source(single RANKS 1 ${MAMBA2_CHECKPOINT})
triax_checkpoint_source(tp2_sp RANKS 2 ${MAMBA2_CHECKPOINT} ${MAMBA2_TP2_SP})
triax_checkpoint_resume(tp2_sp_to_single SOURCE tp2_sp RANKS 1 ${MAMBA2_CHECKPOINT})
triax_checkpoint_resume(single_to_tp2_sp SOURCE single RANKS 2 ${MAMBA2_CHECKPOINT} ${MAMBA2_TP2_SP})

# The SSD's forward and backward timed at the mamba2-780m layer shape and what one layer keeps for
# its backward (`build/bin/mamba2_ssd_bench [--cuda] [batch [length]]`); not run by ctest, built by the
# triax_benches target.
add_executable(mamba2_ssd_bench EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/mamba2_ssd_bench.cpp)
add_dependencies(triax_benches mamba2_ssd_bench)
target_link_libraries(mamba2_ssd_bench PRIVATE triax_mamba2_impl)
triax_use_pch(mamba2_ssd_bench)

# The gated norm's two generations of CUDA kernels (TRIAX_MAMBA2_GATED_NORM_KERNEL=v1, v2) timed at
# the mamba2-780m shape, forward and backward, ms and GB/s (`build/bin/mamba2_gated_norm_bench
# [batch [length]]`); not run by ctest, built by the triax_benches target.
add_executable(mamba2_gated_norm_bench EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/mamba2_gated_norm_bench.cpp)
add_dependencies(triax_benches mamba2_gated_norm_bench)
target_link_libraries(mamba2_gated_norm_bench PRIVATE triax_mamba2_impl)
triax_use_pch(mamba2_gated_norm_bench)

# The token-major conv1d's kernels, loads staged and direct (TRIAX_MAMBA2_CONV_STAGED), timed at the
# mamba2-780m shape, forward and backward, ms and GB/s (`build/bin/mamba2_conv_bench [batch [length]]`);
# not run by ctest, built by the triax_benches target.
add_executable(mamba2_conv_bench EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/mamba2_conv_bench.cpp)
add_dependencies(triax_benches mamba2_conv_bench)
target_link_libraries(mamba2_conv_bench PRIVATE triax_mamba2_impl)
triax_use_pch(mamba2_conv_bench)

# Mixed precision on the GPU (tests/gpu/bf16_follows_fp32.sh): 50 bf16 steps of the tiny Mamba-2
# through its CUDA kernels follow the fp32 CPU run, every step's loss within 2% relative.
if(TRIAX_CUDA)
  add_test(NAME gpu_bf16_mamba2_follows_cpu_fp32
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/gpu/bf16_follows_fp32.sh $<TARGET_FILE:parity_runner> ${MAMBA2_PARITY_CONFIG}
                   ${CMAKE_CURRENT_BINARY_DIR}/bf16_mamba2_follows_fp32)
  set_tests_properties(gpu_bf16_mamba2_follows_cpu_fp32 PROPERTIES LABELS gpu TIMEOUT 300)
endif()
