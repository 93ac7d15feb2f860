# Validation during training on real processes (mpirun, the mpi backend): the tiny parity Llama
# validates after steps 4, 8 and 10 on 8 micro-batches of the synthetic stream's held-out
# samples in all (limit_val_batches = 8 / dp), and every topology's validation losses match the
# single-rank run's within 1e-5 relative; validating leaves training bit for bit as without it;
# a run resumed from step 5 validates on the same samples with the same losses.
set(VALIDATION_DIR ${CMAKE_CURRENT_BINARY_DIR}/validation)
set(VALIDATION_KEYS --set tokens.val_check_interval=4)

add_test(NAME validation.reference
         COMMAND parity_runner run --config ${PARITY_CONFIG} --out ${VALIDATION_DIR}/reference
                 --set checkpoints.checkpoints_path=${VALIDATION_DIR}/reference/run
                 --set checkpoints.checkpoint_interval=5 ${VALIDATION_KEYS} --set tokens.limit_val_batches=8)
set_tests_properties(validation.reference PROPERTIES FIXTURES_SETUP validation_reference LABELS "parity;validation"
                     ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120)

# Validating changes nothing in training: the same losses, norms and parameters, bit for bit.
add_test(NAME validation.training_unchanged
         COMMAND parity_runner compare --reference ${PARITY_DIR}/reference --candidate ${VALIDATION_DIR}/reference
                 --tolerance 0)
set_tests_properties(validation.training_unchanged PROPERTIES
                     FIXTURES_REQUIRED "parity_reference;validation_reference" LABELS "parity;validation")

# validation_parity_case(<name> DP d TP t PP p ENGINE e ZERO z [--set ...]...)
function(validation_parity_case name)
  cmake_parse_arguments(ARG "" "DP" "" ${ARGN})
  math(EXPR limit "8 / ${ARG_DP}")
  triax_config_parity_case(validation.${name} CONFIG ${PARITY_CONFIG} REFERENCE ${VALIDATION_DIR}/reference
                           FIXTURE validation_reference LABELS "parity;validation;multi_rank" DP ${ARG_DP}
                           ${ARG_UNPARSED_ARGUMENTS} MODE ALL_REDUCE ${VALIDATION_KEYS}
                           --set tokens.limit_val_batches=${limit})
endfunction()

validation_parity_case(dp2_zero1 DP 2 TP 1 PP 1 ENGINE afab ZERO 1)
validation_parity_case(tp2 DP 1 TP 2 PP 1 ENGINE afab ZERO 0)
validation_parity_case(pp2_1f1b DP 1 TP 1 PP 2 ENGINE 1f1b ZERO 0)
validation_parity_case(pp2_afab DP 1 TP 1 PP 2 ENGINE afab ZERO 0)
validation_parity_case(pp2_interleaved DP 1 TP 1 PP 2 ENGINE interleaved_1f1b ZERO 0
                       --set parallelism.pp_chunks_per_rank=2)
validation_parity_case(dp2_tp2_pp2 DP 2 TP 2 PP 2 ENGINE 1f1b ZERO 1)

# Resumed from the reference's checkpoint of step 5, on one rank (its validations after steps 8
# and 10 equal the uninterrupted run's bit for bit) and on dp2 x pp2 (within 1e-5).
function(validation_resume_case name ranks)
  set(exact 0)
  if(ranks EQUAL 1)
    set(exact 1)
  endif()
  add_test(NAME validation.resume_${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint/resume_case.sh $<TARGET_FILE:parity_runner>
                   ${MPIEXEC_EXECUTABLE} ${PARITY_CONFIG} ${VALIDATION_DIR}/reference ${VALIDATION_DIR}/reference
                   ${VALIDATION_DIR}/resume_${name} ${ranks} 5 ${VALIDATION_KEYS} ${ARGN})
  set_tests_properties(validation.resume_${name} PROPERTIES FIXTURES_REQUIRED validation_reference
                       LABELS "validation;checkpoint;multi_rank" PROCESSORS ${ranks} TIMEOUT 300
                       ENVIRONMENT "EXACT=${exact}")
endfunction()

validation_resume_case(single 1 --set tokens.limit_val_batches=8)
validation_resume_case(dp2_pp2 4 --set parallelism.dp=2 --set parallelism.pp=2 --set parallelism.pp_engine=1f1b
                       --set tokens.batch_accumulation_per_replica=4 --set tokens.limit_val_batches=4)

# The MoE model at dp2 with expert parallelism 2 (the experts' all-to-all in the forward only)
# against its single-rank run.
set(VALIDATION_MOE_CONFIG ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_moe_parity.yaml)
add_test(NAME validation.moe_reference
         COMMAND parity_runner run --config ${VALIDATION_MOE_CONFIG} --out ${VALIDATION_DIR}/moe_reference
                 --set checkpoints.checkpoints_path=${VALIDATION_DIR}/moe_reference/run ${VALIDATION_KEYS}
                 --set tokens.limit_val_batches=8)
set_tests_properties(validation.moe_reference PROPERTIES FIXTURES_SETUP validation_moe_reference
                     LABELS "parity;validation;moe" ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120)
add_test(NAME validation.moe_dp2_ep2
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/parity/run_case.sh $<TARGET_FILE:parity_runner> ${MPIEXEC_EXECUTABLE}
                 ${VALIDATION_MOE_CONFIG} ${VALIDATION_DIR}/moe_reference ${VALIDATION_DIR}/moe_dp2_ep2 2
                 --set parallelism.dp=2 --set parallelism.expert_parallel_size=2
                 --set tokens.batch_accumulation_per_replica=4 ${VALIDATION_KEYS} --set tokens.limit_val_batches=4)
set_tests_properties(validation.moe_dp2_ep2 PROPERTIES FIXTURES_REQUIRED validation_moe_reference
                     LABELS "parity;validation;multi_rank;moe" PROCESSORS 2 TIMEOUT 240)
