# The SDK's fused ops and fused lm_head + cross-entropy (docs/kernels.md) against the unfused
# LibTorch code. The *Cpu suites run everywhere; the *Cuda suites run the CUDA kernels, carry the
# ctest label `gpu` and skip when no GPU is present (all in sdk_test, tests/sdk_test.cmake).
target_sources(sdk_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/fused_ops_test.cpp
                                ${CMAKE_CURRENT_LIST_DIR}/fused_linear_cross_entropy_test.cpp)

# Fused against unfused on one GPU at SmolLM-135M shapes (built, not run by ctest).
if(TRIAX_CUDA)
  add_executable(fused_ops_bench ${CMAKE_CURRENT_LIST_DIR}/fused_ops_bench.cpp)
  target_link_libraries(fused_ops_bench PRIVATE triax_sdk)
  triax_use_pch(fused_ops_bench)
  add_dependencies(triax_benches fused_ops_bench)
endif()

# Mixed precision: 50 bf16 steps on the GPU (nccl at world size 1) follow the fp32 CPU run.
if(TRIAX_CUDA)
  add_test(NAME gpu_bf16_follows_cpu_fp32
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/gpu/bf16_follows_fp32.sh $<TARGET_FILE:parity_runner>
                   ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_llama_parity.yaml ${CMAKE_CURRENT_BINARY_DIR}/bf16_follows_fp32)
  set_tests_properties(gpu_bf16_follows_cpu_fp32 PROPERTIES LABELS gpu TIMEOUT 300)
  # The same batch as one micro-batch a step: the bf16 gradients go to the fused AdamW kernel as
  # computed, with the clipping coefficient beside them.
  add_test(NAME gpu_bf16_one_micro_batch_follows_cpu_fp32
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/gpu/bf16_follows_fp32.sh $<TARGET_FILE:parity_runner>
                   ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_llama_parity.yaml
                   ${CMAKE_CURRENT_BINARY_DIR}/bf16_one_micro_batch_follows_fp32 0.02
                   --set tokens.micro_batch_size=16 --set tokens.batch_accumulation_per_replica=1)
  set_tests_properties(gpu_bf16_one_micro_batch_follows_cpu_fp32 PROPERTIES LABELS gpu TIMEOUT 300)
  # general.cuda_graphs: losses, gradient norms and parameters equal the run without graphs, bit for bit.
  add_test(NAME gpu_cuda_graphs_equal_eager
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/gpu/cuda_graphs_equal_eager.sh $<TARGET_FILE:parity_runner>
                   ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_llama_parity.yaml
                   ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_moe_parity.yaml ${CMAKE_CURRENT_BINARY_DIR}/cuda_graphs_equal_eager)
  set_tests_properties(gpu_cuda_graphs_equal_eager PROPERTIES LABELS gpu TIMEOUT 300)
endif()

# A kernel's test program NAME.cpp: its *Cpu.* suites in every build, its *Cuda.* suites labelled
# gpu (they skip without a GPU).
function(triax_kernel_test name)
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/${name}.cpp)
  target_link_libraries(${name} PRIVATE triax_sdk GTest::gtest_main)
  triax_use_pch(${name})
  triax_discover_test_suites(${name} TEST_FILTER "*Cpu.*" TEST_LIST ${name}_cpu)
  triax_discover_test_suites(${name} TEST_FILTER "*Cuda.*" TEST_LIST ${name}_cuda PROPERTIES LABELS gpu)
endfunction()

# rotary_qkv_into_cache: the decoding step's rotary kernels writing into the cache.
triax_kernel_test(rotary_cache_test)

# decode_gemv: the GEMV kernel of a decoding step's linear layers (on unless TRIAX_DECODE_GEMV=0).
triax_kernel_test(decode_gemv_test)

# decode_gemv_by_expert / decode_swiglu_by_expert: a decoding step's MoE experts, row by row.
triax_kernel_test(decode_experts_test)

# decode_norm_gemv: a decoding step's RMSNorm folded into the GEMV after it (TRIAX_DECODE_NORM_GEMV=1).
triax_kernel_test(decode_norm_gemv_test)
