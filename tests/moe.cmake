# The moe model plugin (plugins/models/moe): unit tests (config refusals, the balance loss pulling
# an imbalanced router toward uniform, grouped GEMM against the per-expert loop), refusals through
# the command line, and whole runs of tests/parity/tiny_moe_parity.yaml at expert-parallel
# topologies against the single-rank run: losses, gradient norms, final parameters and every
# named auxiliary loss within 1e-5 (fp32, CPU). Label: moe (the runs also carry parity).
add_executable(moe_test ${CMAKE_CURRENT_LIST_DIR}/moe_test.cpp ${CMAKE_CURRENT_LIST_DIR}/moe_grouped_gemm_cuda_test.cpp
                        ${CMAKE_CURRENT_LIST_DIR}/moe_fp8_experts_test.cpp)
target_link_libraries(moe_test PRIVATE triax_moe_impl GTest::gtest_main)
target_include_directories(moe_test PRIVATE ${PROJECT_SOURCE_DIR}/sdk/src)  # fp8_grouped_casts.hpp
triax_use_pch(moe_test)
triax_discover_test_suites(moe_test TEST_FILTER "-*Cuda*" TEST_LIST moe_test_cpu PROPERTIES LABELS "moe")
# The *Cuda suite (grouped GEMM against the loop in bf16) skips without a GPU.
triax_discover_test_suites(moe_test TEST_FILTER "*Cuda*" TEST_LIST moe_test_cuda TEST_SUFFIX ".gpu" PROPERTIES LABELS "moe;gpu")
# The whole parity model in bf16 on one GPU (the grouped GEMM path) follows its fp32 CPU run,
# within 5% rather than the dense model's 2%: bf16 rounding flips top-2 choices between nearly
# tied experts, and from there the curve wanders (measured 4.2% at step 49 with the fused kernels
# and 4.0% without, after 40 steps within 1.5%).
if(TRIAX_CUDA)
  add_test(NAME moe.gpu_bf16_follows_cpu_fp32
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/gpu/bf16_follows_fp32.sh $<TARGET_FILE:parity_runner>
                   ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_moe_parity.yaml ${CMAKE_CURRENT_BINARY_DIR}/moe_bf16_follows_fp32
                   0.05)
  set_tests_properties(moe.gpu_bf16_follows_cpu_fp32 PROPERTIES LABELS "gpu;moe" TIMEOUT 300)
  # The same with the experts in fp8 (docs/fp8.md: rowwise, at::_scaled_grouped_mm; their
  # intermediate size made a multiple of 16): on the GPU they train in fp8, on the CPU they fall
  # back to fp32. The tolerance is a first guess, not yet measured (bf16 alone: 4.2%).
  add_test(NAME moe.gpu_fp8_experts_follow_cpu_fp32
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/gpu/bf16_follows_fp32.sh $<TARGET_FILE:parity_runner>
                   ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_moe_parity.yaml ${CMAKE_CURRENT_BINARY_DIR}/moe_fp8_experts_follow_fp32
                   0.1 --set model.model_config.moe_config.moe_intermediate_size=32 --set fp8.recipe=rowwise
                   --set "fp8.linears=[model.layers.*.mlp.experts]")
  set_tests_properties(moe.gpu_fp8_experts_follow_cpu_fp32 PROPERTIES LABELS "gpu;moe" TIMEOUT 300
                       ENVIRONMENT TRIAX_FP8_EXPERTS=1)
  # The experts' forward + backward in bf16 against fp8 at moe-1b's layer (built, not run by ctest).
  add_executable(moe_fp8_experts_bench ${CMAKE_CURRENT_LIST_DIR}/moe_fp8_experts_bench.cpp)
  target_link_libraries(moe_fp8_experts_bench PRIVATE triax_moe_block)
  target_include_directories(moe_fp8_experts_bench PRIVATE ${PROJECT_SOURCE_DIR}/sdk/src)  # fp8_grouped_casts.hpp
  triax_use_pch(moe_fp8_experts_bench)
  add_dependencies(triax_benches moe_fp8_experts_bench)
endif()

add_test(NAME moe.bad_input COMMAND ${CMAKE_CURRENT_LIST_DIR}/moe_bad_input_test.sh $<TARGET_FILE:triax>
                                    ${MPIEXEC_EXECUTABLE} ${CMAKE_SOURCE_DIR})
set_tests_properties(moe.bad_input PROPERTIES LABELS "moe" PROCESSORS 3 TIMEOUT 120)
add_dependencies(parity_runner triax_moe)
add_dependencies(triax_logits triax_moe)

set(MOE_CONFIG ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_moe_parity.yaml)
set(MOE_DIR ${CMAKE_CURRENT_BINARY_DIR}/moe_parity)

# triax_moe_reference(<name> [--set ...]...): the single-rank run the cases of <name> compare with.
function(triax_moe_reference name)
  add_test(NAME moe.reference_${name}
           COMMAND parity_runner run --config ${MOE_CONFIG} --out ${MOE_DIR}/reference_${name}
                   --set checkpoints.checkpoints_path=${MOE_DIR}/reference_${name}/run ${ARGN})
  set_tests_properties(moe.reference_${name} PROPERTIES FIXTURES_SETUP moe_reference_${name}
                       LABELS "parity;moe" ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 60)
endfunction()

# triax_moe_case(<name> REFERENCE <reference> RANKS n [SAVES 1] [--set ...]...)
function(triax_moe_case name)
  cmake_parse_arguments(ARG "" "RANKS;SAVES;REFERENCE" "" ${ARGN})
  add_test(NAME moe.${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/parity/moe_case.sh ${TRIAX_TEST_PYTHON} $<TARGET_FILE:parity_runner>
                   ${MPIEXEC_EXECUTABLE} ${MOE_CONFIG} ${MOE_DIR}/reference_${ARG_REFERENCE} ${MOE_DIR}/${name}
                   ${ARG_RANKS} ${ARG_UNPARSED_ARGUMENTS})
  set_tests_properties(moe.${name} PROPERTIES FIXTURES_REQUIRED moe_reference_${ARG_REFERENCE}
                       LABELS "parity;multi_rank;moe" PROCESSORS ${ARG_RANKS} TIMEOUT 240)
  if(ARG_SAVES)
    set_tests_properties(moe.${name} PROPERTIES FIXTURES_SETUP moe_source_${name})
  endif()
endfunction()

triax_moe_reference(main)
set(DP2 --set parallelism.dp=2 --set parallelism.expert_parallel_size=2 --set tokens.batch_accumulation_per_replica=4)
triax_moe_case(dp2_ep2 REFERENCE main RANKS 2 SAVES 1 ${DP2} --set checkpoints.checkpoint_interval=3)
triax_moe_case(dp2_ep2_allgather REFERENCE main RANKS 2 ${DP2}
               --set model.model_config.moe_config.token_dispatcher_type=allgather)
triax_moe_case(dp4_ep4 REFERENCE main RANKS 4 --set parallelism.dp=4 --set parallelism.expert_parallel_size=4
               --set tokens.batch_accumulation_per_replica=2)
triax_moe_case(dp4_ep2_zero1 REFERENCE main RANKS 4 --set parallelism.dp=4 --set parallelism.expert_parallel_size=2
               --set tokens.batch_accumulation_per_replica=2 --set optimizer.zero_stage=1)
triax_moe_case(dp2_ep2_tp2 REFERENCE main RANKS 4 ${DP2} --set parallelism.tp=2)
triax_moe_case(dp2_ep2_tp2_sequence_parallel REFERENCE main RANKS 4 ${DP2} --set parallelism.tp=2
               --set parallelism.tp_mode=REDUCE_SCATTER)
triax_moe_case(dp2_ep2_pp2_afab REFERENCE main RANKS 4 ${DP2} --set parallelism.pp=2 --set parallelism.pp_engine=afab)
triax_moe_case(dp2_ep2_pp2_1f1b REFERENCE main RANKS 4 ${DP2} --set parallelism.pp=2 --set parallelism.pp_engine=1f1b)
triax_moe_case(dp2_ep2_tp2_pp2 REFERENCE main RANKS 8 ${DP2} --set parallelism.tp=2 --set parallelism.pp=2
               --set parallelism.pp_engine=1f1b --set parallelism.tp_mode=REDUCE_SCATTER)
# The zero-bubble engines (zero_bubble.cmake): the experts' and router's gradients in B, the
# linears' in W; zb_v's V holds the embedding and the head on rank 0.
foreach(engine zb_h1 zb_v)
  triax_moe_case(dp2_ep2_pp2_${engine} REFERENCE main RANKS 4 ${DP2} --set parallelism.pp=2
                 --set parallelism.pp_engine=${engine})
  set_property(TEST moe.dp2_ep2_pp2_${engine} APPEND PROPERTY LABELS zero_bubble)
endforeach()
# Layers run without autograd in their first forward and again in backward: the router's losses
# leave each block as side outputs (triax/layers/side_outputs.hpp) and keep their gradient. ZeRO-3
# shards the experts over edp and the rest over dp (docs/zero3.md).
triax_moe_case(dp2_ep2_recompute REFERENCE main RANKS 2 ${DP2} --set parallelism.recompute_layer=true)
# moe_layer_recompute: only the MoE blocks; with tp 2 (sequence parallel), nested in recompute_layer.
triax_moe_case(dp2_ep2_moe_layer_recompute REFERENCE main RANKS 2 ${DP2} --set parallelism.moe_layer_recompute=true)
triax_moe_case(dp2_ep2_tp2_sp_both_recomputes REFERENCE main RANKS 4 ${DP2} --set parallelism.tp=2
               --set parallelism.tp_mode=REDUCE_SCATTER --set parallelism.recompute_layer=true
               --set parallelism.moe_layer_recompute=true)
# ... and nested in a ZeRO-3 block, whose backward runs the layer (and so the MoE block's own
# recomputation) with the gathered parameters.
triax_moe_case(dp4_ep2_zero3_moe_layer_recompute REFERENCE main RANKS 4 --set parallelism.dp=4
               --set parallelism.expert_parallel_size=2 --set tokens.batch_accumulation_per_replica=2
               --set optimizer.zero_stage=3 --set parallelism.moe_layer_recompute=true)
triax_moe_case(dp4_ep2_zero3 REFERENCE main RANKS 4 --set parallelism.dp=4 --set parallelism.expert_parallel_size=2
               --set tokens.batch_accumulation_per_replica=2 --set optimizer.zero_stage=3)
triax_moe_case(dp2_ep2_pp2_1f1b_zero3 REFERENCE main RANKS 4 ${DP2} --set parallelism.pp=2
               --set parallelism.pp_engine=1f1b --set optimizer.zero_stage=3)

# Zero tokens: 2 tokens per micro-batch, top-1 of 8 experts over 4 ep ranks: at least two ranks
# and six experts receive nothing in every MoE layer of every micro-batch. With so few tokens some
# gradient entries are as small as Adam's eps, where its first step turns rounding noise into a
# whole learning-rate step: a larger eps keeps the comparison about the exchange, not about that.
set(ZERO --set tokens.sequence_length=2 --set tokens.micro_batch_size=1 --set model.model_config.moe_config.num_experts=8
    --set model.model_config.moe_config.top_k=1 --set optimizer.optimizer_factory.adam_eps=1.0e-4)
triax_moe_reference(zero_tokens ${ZERO})
triax_moe_case(dp4_ep4_zero_tokens REFERENCE zero_tokens RANKS 4 ${ZERO} --set parallelism.dp=4
               --set parallelism.expert_parallel_size=4 --set tokens.batch_accumulation_per_replica=2)
triax_moe_case(dp4_ep4_zero_tokens_allgather REFERENCE zero_tokens RANKS 4 ${ZERO} --set parallelism.dp=4
               --set parallelism.expert_parallel_size=4 --set tokens.batch_accumulation_per_replica=2
               --set model.model_config.moe_config.token_dispatcher_type=allgather)

# The (dp2, ep2) checkpoint of step 3 stores each expert shard once; resumed at (dp4, ep4), at
# (tp2, ep1) and at (dp4, ep2) with ZeRO-3, each ends within 1e-5 of the uninterrupted single-rank run.
add_test(NAME moe.checkpoint_stores_each_expert_once
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/parity/check_moe_expert_shards.sh $<TARGET_FILE:triax>
                 ${MOE_DIR}/dp2_ep2/run/step_00000003)
set_tests_properties(moe.checkpoint_stores_each_expert_once PROPERTIES FIXTURES_REQUIRED moe_source_dp2_ep2
                     LABELS "checkpoint;moe")
function(triax_moe_resume name)
  cmake_parse_arguments(ARG "" "RANKS" "" ${ARGN})
  add_test(NAME moe.resume_${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint/resume_case.sh $<TARGET_FILE:parity_runner>
                   ${MPIEXEC_EXECUTABLE} ${MOE_CONFIG} ${MOE_DIR}/reference_main ${MOE_DIR}/dp2_ep2
                   ${MOE_DIR}/resume_${name} ${ARG_RANKS} 3 ${ARG_UNPARSED_ARGUMENTS})
  set_tests_properties(moe.resume_${name} PROPERTIES FIXTURES_REQUIRED "moe_reference_main;moe_source_dp2_ep2"
                       LABELS "checkpoint;multi_rank;moe" PROCESSORS ${ARG_RANKS} TIMEOUT 120)
endfunction()
triax_moe_resume(dp4_ep4 RANKS 4 --set parallelism.dp=4 --set parallelism.expert_parallel_size=4
                 --set tokens.batch_accumulation_per_replica=2)
triax_moe_resume(tp2_ep1 RANKS 2 --set parallelism.tp=2)
triax_moe_resume(dp4_ep2_zero3 RANKS 4 --set parallelism.dp=4 --set parallelism.expert_parallel_size=2
                 --set tokens.batch_accumulation_per_replica=2 --set optimizer.zero_stage=3)

# Hugging Face: Mixtral and Qwen2-MoE exported and imported, logits against transformers; the
# cached incremental logits equal the full forward's.
triax_hf_logits_test(moe.hf_logits_match_transformers hf_moe_logits_test.py
                     tiny_moe.yaml hf_moe_logits "python;checkpoint;moe")

# The sliding window against transformers' Mixtral and Qwen2-MoE: import and export, logits equal,
# and the refusals of a window triax cannot express.
triax_hf_logits_test(moe.hf_sliding_window_matches_transformers hf_sliding_window_test.py
                     tiny_moe.yaml hf_sliding_window "python;checkpoint;moe")
