# The mamba model plugin's unit tests (included from tests/CMakeLists.txt): config, initialisation,
# logits against an independent reference, recomputation, bad input, and generation through the
# cache, and the op counts of one layer's step; on a GPU (MambaCacheCuda, label gpu) the fused
# decoding step against the full forward and under a CUDA graph; the SDK's add_rms_norm_fp32_residual
# that the blocks' decoding step adds and normalises with (AddRmsNormFp32Residual{Cpu,Cuda}); the
# SDK's rms_norm_of_fp32_residual and add_to_fp32_residual of their training forward with
# TRIAX_MAMBA_BLOCK_NORM_FUSED=1 (RmsNormOfFp32Residual{Cpu,Cuda}, AddToFp32Residual{Cpu,Cuda}) and
# the block with that switch against it off, bit for bit (MambaBlockNorm{Cpu,Cuda}); the layer with
# TRIAX_MAMBA_RECOMPUTE_CONV=1 against it off, bit for bit, and the bytes mamba_inner() keeps
# (MambaRecomputeConv{Cpu,Cuda}). They link the model code directly (triax_mamba_impl).
add_executable(mamba_test ${CMAKE_CURRENT_LIST_DIR}/mamba_model_test.cpp ${CMAKE_CURRENT_LIST_DIR}/mamba_cache_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/mamba_op_count_test.cpp ${CMAKE_CURRENT_LIST_DIR}/mamba_cache_cuda_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/add_rms_norm_fp32_residual_test.cpp ${CMAKE_CURRENT_LIST_DIR}/rms_norm_of_fp32_residual_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/add_to_fp32_residual_test.cpp ${CMAKE_CURRENT_LIST_DIR}/mamba_block_norm_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/mamba_recompute_conv_test.cpp)
target_link_libraries(mamba_test PRIVATE triax_mamba_impl GTest::gtest_main)
triax_use_pch(mamba_test)
triax_discover_test_suites(mamba_test TEST_FILTER "-*Cuda.*" TEST_LIST mamba_test_cpu)
triax_discover_test_suites(mamba_test TEST_FILTER "*Cuda.*" TEST_LIST mamba_test_cuda PROPERTIES LABELS gpu)
