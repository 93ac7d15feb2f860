# Context parallelism (parallelism.context_parallel_size): the parity matrix's tiny models trained
# on real processes (mpirun, the mpi backend) with each sequence split over cp ranks, against
# their single-rank runs (losses, gradient norms and every rank's final parameters within 1e-5
# relative, fp32); included after the parity, checkpoint, attention-mask and qwen2 files, whose
# runner, references and CMake functions it uses.

# triax_cp_parity_case(<test name> CONFIG <yaml> REFERENCE <dir> FIXTURE <fixture> CP c
#                      DP d TP t PP p ENGINE afab|1f1b ZERO 0|1 MODE ALL_REDUCE|REDUCE_SCATTER
#                      [AUX_LOSSES] [--set ...]...): triax_config_parity_case (parity.cmake) labelled
# context_parallel.
function(triax_cp_parity_case test)
  triax_config_parity_case(${test} LABELS "parity;multi_rank;context_parallel" ${ARGN})
endfunction()

set(CP_LLAMA CONFIG ${PARITY_CONFIG} REFERENCE ${PARITY_DIR}/reference FIXTURE parity_reference)
triax_cp_parity_case(context_parallel.cp2 ${CP_LLAMA} CP 2 DP 1 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_cp_parity_case(context_parallel.cp4 ${CP_LLAMA} CP 4 DP 1 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_cp_parity_case(context_parallel.cp2_tp2 ${CP_LLAMA} CP 2 DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_cp_parity_case(context_parallel.cp2_tp2_sp ${CP_LLAMA} CP 2 DP 1 TP 2 PP 1 ENGINE afab ZERO 0
                     MODE REDUCE_SCATTER)
triax_cp_parity_case(context_parallel.cp2_pp2_1f1b ${CP_LLAMA} CP 2 DP 1 TP 1 PP 2 ENGINE 1f1b ZERO 0
                     MODE ALL_REDUCE)
triax_cp_parity_case(context_parallel.cp2_pp2_afab ${CP_LLAMA} CP 2 DP 1 TP 1 PP 2 ENGINE afab ZERO 0
                     MODE ALL_REDUCE)
triax_cp_parity_case(context_parallel.cp2_pp2_interleaved ${CP_LLAMA} CP 2 DP 1 TP 1 PP 2 ENGINE interleaved_1f1b
                     ZERO 0 MODE ALL_REDUCE --set parallelism.pp_chunks_per_rank=2)
triax_cp_parity_case(context_parallel.dp2_cp2_zero1 ${CP_LLAMA} CP 2 DP 2 TP 1 PP 1 ENGINE afab ZERO 1
                     MODE ALL_REDUCE)
# ZeRO-3 shards over dp x cp: the cp ranks hold the same parameters.
triax_cp_parity_case(context_parallel.cp2_zero3 ${CP_LLAMA} CP 2 DP 1 TP 1 PP 1 ENGINE afab ZERO 3 MODE ALL_REDUCE)
triax_cp_parity_case(context_parallel.dp2_cp2_zero3 ${CP_LLAMA} CP 2 DP 2 TP 1 PP 1 ENGINE afab ZERO 3
                     MODE ALL_REDUCE)
# Whole layers recomputed in backward: the K/V all-gather runs again inside the backward.
triax_cp_parity_case(context_parallel.cp2_recompute_layer ${CP_LLAMA} CP 2 DP 1 TP 1 PP 1 ENGINE afab ZERO 0
                     MODE ALL_REDUCE --set parallelism.recompute_layer=true)
# Document masking and the sliding window: documents found from the positions gathered over cp.
triax_cp_parity_case(context_parallel.cp2_documents_window CONFIG ${PARITY_CONFIG}
                     REFERENCE ${DOC_MASKING_DIR}/reference FIXTURE doc_masking_reference
                     CP 2 DP 1 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE ${DOC_MASKING_SETTINGS})
# Validation: each cp rank's loss weighted as in training, summed over dp x cp (validation.cmake's reference).
triax_cp_parity_case(context_parallel.validation_cp2 CONFIG ${PARITY_CONFIG} REFERENCE ${VALIDATION_DIR}/reference
                     FIXTURE validation_reference CP 2 DP 1 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE
                     ${VALIDATION_KEYS} --set tokens.limit_val_batches=8)
# qwen2: q/k/v biases and the z-loss (a mean over the counted tokens, weighted like the loss).
triax_cp_parity_case(context_parallel.qwen2_cp2 CONFIG ${QWEN2_PARITY_CONFIG}
                     REFERENCE ${QWEN2_PARITY_DIR}/reference FIXTURE qwen2_parity_reference AUX_LOSSES
                     CP 2 DP 1 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
# moe: the routers' balance and z losses from statistics summed over cp (and the attention as above).
triax_cp_parity_case(context_parallel.moe_cp2 CONFIG ${MOE_CONFIG} REFERENCE ${MOE_DIR}/reference_main
                     FIXTURE moe_reference_main AUX_LOSSES CP 2 DP 1 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
# ... with expert parallelism and ZeRO-1: expert gradients and shards over edp x cp.
triax_cp_parity_case(context_parallel.moe_dp2_ep2_cp2_zero1 CONFIG ${MOE_CONFIG} REFERENCE ${MOE_DIR}/reference_main
                     FIXTURE moe_reference_main AUX_LOSSES CP 2 DP 2 TP 1 PP 1 ENGINE afab ZERO 1 MODE ALL_REDUCE
                     --set parallelism.expert_parallel_size=2)
# ... and with ZeRO-3: expert shards over edp x cp, the routers' losses carried out of each block.
triax_cp_parity_case(context_parallel.moe_dp2_ep2_cp2_zero3 CONFIG ${MOE_CONFIG} REFERENCE ${MOE_DIR}/reference_main
                     FIXTURE moe_reference_main AUX_LOSSES CP 2 DP 2 TP 1 PP 1 ENGINE afab ZERO 3 MODE ALL_REDUCE
                     --set parallelism.expert_parallel_size=2)

# Ring attention (parallelism.context_parallel_attention: ring): K/V blocks passed around the cp
# ranks with start_send_recv, partial softmaxes merged, a ring backward; the same single-rank runs.
set(RING --set parallelism.context_parallel_attention=ring)
triax_cp_parity_case(context_parallel.ring_cp2 ${CP_LLAMA} CP 2 DP 1 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE ${RING})
triax_cp_parity_case(context_parallel.ring_cp4 ${CP_LLAMA} CP 4 DP 1 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE ${RING})
triax_cp_parity_case(context_parallel.ring_cp2_tp2_sp ${CP_LLAMA} CP 2 DP 1 TP 2 PP 1 ENGINE afab ZERO 0
                     MODE REDUCE_SCATTER ${RING})
triax_cp_parity_case(context_parallel.ring_cp2_pp2_1f1b ${CP_LLAMA} CP 2 DP 1 TP 1 PP 2 ENGINE 1f1b ZERO 0
                     MODE ALL_REDUCE ${RING})
triax_cp_parity_case(context_parallel.ring_dp2_cp2_zero1 ${CP_LLAMA} CP 2 DP 2 TP 1 PP 1 ENGINE afab ZERO 1
                     MODE ALL_REDUCE ${RING})
# Recomputation runs the ring's forward again inside the backward.
triax_cp_parity_case(context_parallel.ring_cp2_recompute_layer ${CP_LLAMA} CP 2 DP 1 TP 1 PP 1 ENGINE afab ZERO 0
                     MODE ALL_REDUCE --set parallelism.recompute_layer=true ${RING})
# Each block's mask from the documents (positions gathered over cp) and the window.
triax_cp_parity_case(context_parallel.ring_cp2_documents_window CONFIG ${PARITY_CONFIG}
                     REFERENCE ${DOC_MASKING_DIR}/reference FIXTURE doc_masking_reference
                     CP 2 DP 1 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE ${DOC_MASKING_SETTINGS} ${RING})
triax_cp_parity_case(context_parallel.ring_qwen2_cp2 CONFIG ${QWEN2_PARITY_CONFIG}
                     REFERENCE ${QWEN2_PARITY_DIR}/reference FIXTURE qwen2_parity_reference AUX_LOSSES
                     CP 2 DP 1 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE ${RING})
triax_cp_parity_case(context_parallel.ring_moe_cp2 CONFIG ${MOE_CONFIG} REFERENCE ${MOE_DIR}/reference_main
                     FIXTURE moe_reference_main AUX_LOSSES CP 2 DP 1 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE
                     ${RING})

# Parameters are replicated over cp: a checkpoint saved at cp 2 resumes at cp 1 and at dp 2 x cp 2
# with ZeRO-1, finishing as the uninterrupted single-rank run.
triax_checkpoint_source(cp2 RANKS 2 --set parallelism.context_parallel_size=2)
triax_checkpoint_resume(cp2_to_single SOURCE cp2 RANKS 1 ${TOPOLOGY_111})
triax_checkpoint_resume(cp2_to_dp2_cp2_zero1 SOURCE cp2 RANKS 4 --set parallelism.context_parallel_size=2
                        --set parallelism.dp=2 --set optimizer.zero_stage=1
                        --set tokens.batch_accumulation_per_replica=4)

# Bad input: a sequence length 2 x cp chunks do not split; a model without attention (mamba).
add_test(NAME context_parallel.refusals
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/context_parallel_refusals_test.sh $<TARGET_FILE:triax> ${MPIEXEC_EXECUTABLE}
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(context_parallel.refusals PROPERTIES LABELS "context_parallel;multi_rank" PROCESSORS 2
                     TIMEOUT 120)

# The slices and the attention mask over the gathered keys, without communication.
# Ring attention without communication: its blocks, merged, against plain attention on the whole
# sequence; the choice read from triax_model_context. Both in sdk_test (tests/sdk_test.cmake).
target_sources(sdk_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/context_parallel_slice_test.cpp
                                ${CMAKE_CURRENT_LIST_DIR}/ring_attention_test.cpp)
triax_add_area_suites(sdk_test SUITES ContextParallelSlice.* RingAttentionChoice.* RingBlocks.*
                      PROPERTIES LABELS context_parallel)
