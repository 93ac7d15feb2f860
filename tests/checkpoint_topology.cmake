# Checkpoints across topologies, on real processes (mpirun, the mpi backend): source runs of the
# parity matrix's tiny Llama save at step 5; other topologies resume from there and must finish
# within 1e-5 of the uninterrupted single-rank run (losses of steps 6-10 and final parameters);
# the same topology must continue bit for bit. Reuses the parity runner and its reference.
set(CHECKPOINT_DIR ${CMAKE_CURRENT_BINARY_DIR}/checkpoint)

# Optional, for another optimizer or model (muon.cmake): PREFIX of the test and fixture names
# (default checkpoint), DIR of the runs (default CHECKPOINT_DIR), REFERENCE run and its FIXTURE
# (default the parity matrix's), an extra LABEL, the CONFIG trained (default the parity matrix's).
macro(triax_checkpoint_defaults)
  if(NOT ARG_PREFIX)
    set(ARG_PREFIX checkpoint)
  endif()
  if(NOT ARG_DIR)
    set(ARG_DIR ${CHECKPOINT_DIR})
  endif()
  if(NOT ARG_REFERENCE)
    set(ARG_REFERENCE ${PARITY_DIR}/reference)
    set(ARG_FIXTURE parity_reference)
  endif()
  if(NOT ARG_CONFIG)
    set(ARG_CONFIG ${PARITY_CONFIG})
  endif()
  set(labels checkpoint multi_rank ${ARG_LABEL})
endmacro()

# triax_checkpoint_source(<name> RANKS n [PREFIX p DIR d REFERENCE r FIXTURE f LABEL l CONFIG c] [--set ...]...):
# a parity run that also saves every 5 steps.
function(triax_checkpoint_source name)
  cmake_parse_arguments(ARG "" "RANKS;PREFIX;DIR;REFERENCE;FIXTURE;LABEL;CONFIG" "" ${ARGN})
  triax_checkpoint_defaults()
  add_test(NAME ${ARG_PREFIX}.source.${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/parity/run_case.sh $<TARGET_FILE:parity_runner> ${MPIEXEC_EXECUTABLE}
                   ${ARG_CONFIG} ${ARG_REFERENCE} ${ARG_DIR}/${name} ${ARG_RANKS}
                   --set checkpoints.checkpoint_interval=5 ${ARG_UNPARSED_ARGUMENTS})
  set_tests_properties(${ARG_PREFIX}.source.${name} PROPERTIES FIXTURES_REQUIRED ${ARG_FIXTURE}
                       FIXTURES_SETUP ${ARG_PREFIX}_source_${name} LABELS "${labels}"
                       PROCESSORS ${ARG_RANKS} TIMEOUT 300)
endfunction()

# triax_checkpoint_resume(<name> SOURCE s RANKS n [EXACT] [PREFIX ...as above] [--set ...]...)
function(triax_checkpoint_resume name)
  cmake_parse_arguments(ARG "EXACT" "SOURCE;RANKS;PREFIX;DIR;REFERENCE;FIXTURE;LABEL;CONFIG" "" ${ARGN})
  triax_checkpoint_defaults()
  add_test(NAME ${ARG_PREFIX}.resume.${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint/resume_case.sh $<TARGET_FILE:parity_runner>
                   ${MPIEXEC_EXECUTABLE} ${ARG_CONFIG} ${ARG_REFERENCE} ${ARG_DIR}/${ARG_SOURCE}
                   ${ARG_DIR}/resume_${name} ${ARG_RANKS} 5 ${ARG_UNPARSED_ARGUMENTS})
  set(exact 0)
  if(ARG_EXACT)
    set(exact 1)
  endif()
  set_tests_properties(${ARG_PREFIX}.resume.${name} PROPERTIES
                       FIXTURES_REQUIRED "${ARG_FIXTURE};${ARG_PREFIX}_source_${ARG_SOURCE}"
                       LABELS "${labels}" PROCESSORS ${ARG_RANKS} TIMEOUT 300
                       ENVIRONMENT "EXACT=${exact}")
endfunction()

set(TOPOLOGY_111 --set parallelism.dp=1 --set parallelism.tp=1 --set parallelism.pp=1
    --set tokens.batch_accumulation_per_replica=8)
set(TOPOLOGY_DP2_TP2_PP2_ZERO1 --set parallelism.dp=2 --set parallelism.tp=2 --set parallelism.pp=2
    --set optimizer.zero_stage=1 --set parallelism.pp_engine=1f1b --set tokens.batch_accumulation_per_replica=4)
set(TOPOLOGY_TP2_DP2_ZERO1 --set parallelism.dp=2 --set parallelism.tp=2 --set optimizer.zero_stage=1
    --set parallelism.tp_mode=REDUCE_SCATTER --set tokens.batch_accumulation_per_replica=4)
set(TOPOLOGY_DP4_ZERO1 --set parallelism.dp=4 --set optimizer.zero_stage=1
    --set tokens.batch_accumulation_per_replica=2)
set(TOPOLOGY_PP4 --set parallelism.pp=4 --set parallelism.pp_engine=1f1b)
set(TOPOLOGY_PP2_TP2 --set parallelism.pp=2 --set parallelism.tp=2)
set(TOPOLOGY_DP2_ZERO3 --set parallelism.dp=2 --set optimizer.zero_stage=3
    --set tokens.batch_accumulation_per_replica=4)
set(TOPOLOGY_DP2_TP2_ZERO3 --set parallelism.dp=2 --set parallelism.tp=2 --set optimizer.zero_stage=3
    --set tokens.batch_accumulation_per_replica=4)
set(TOPOLOGY_DP4_ZERO3 --set parallelism.dp=4 --set optimizer.zero_stage=3
    --set tokens.batch_accumulation_per_replica=2)

triax_checkpoint_source(single RANKS 1 ${TOPOLOGY_111})
triax_checkpoint_source(dp2_tp2_pp2_zero1 RANKS 8 ${TOPOLOGY_DP2_TP2_PP2_ZERO1})
triax_checkpoint_source(tp2_dp2_zero1 RANKS 4 ${TOPOLOGY_TP2_DP2_ZERO1})
triax_checkpoint_source(pp4 RANKS 4 ${TOPOLOGY_PP4})
triax_checkpoint_source(dp2_tp2_zero3 RANKS 4 ${TOPOLOGY_DP2_TP2_ZERO3})

# Saved in the background (checkpoints.async_save): the source matches the reference, the same
# topology continues bit for bit and another one within tolerance.
set(TOPOLOGY_DP2_PP2 --set parallelism.dp=2 --set parallelism.pp=2 --set parallelism.pp_engine=1f1b
    --set tokens.batch_accumulation_per_replica=4)
triax_checkpoint_source(dp2_pp2_async RANKS 4 ${TOPOLOGY_DP2_PP2} --set checkpoints.async_save=true)
triax_checkpoint_resume(same_dp2_pp2_async SOURCE dp2_pp2_async RANKS 4 EXACT ${TOPOLOGY_DP2_PP2}
                        --set checkpoints.async_save=true)
triax_checkpoint_resume(dp2_pp2_async_to_single SOURCE dp2_pp2_async RANKS 1 ${TOPOLOGY_111})

# The same topology: bit for bit.
triax_checkpoint_resume(same_dp2_tp2_pp2_zero1 SOURCE dp2_tp2_pp2_zero1 RANKS 8 EXACT ${TOPOLOGY_DP2_TP2_PP2_ZERO1})
triax_checkpoint_resume(same_single SOURCE single RANKS 1 EXACT ${TOPOLOGY_111})
# Resharded on load.
triax_checkpoint_resume(dp2_tp2_pp2_to_single SOURCE dp2_tp2_pp2_zero1 RANKS 1 ${TOPOLOGY_111})
triax_checkpoint_resume(single_to_dp2_tp2_pp2 SOURCE single RANKS 8 ${TOPOLOGY_DP2_TP2_PP2_ZERO1})
triax_checkpoint_resume(tp2_dp2_zero1_to_dp4_zero1 SOURCE tp2_dp2_zero1 RANKS 4 ${TOPOLOGY_DP4_ZERO1})
triax_checkpoint_resume(pp4_to_pp2_tp2 SOURCE pp4 RANKS 4 ${TOPOLOGY_PP2_TP2})
# ZeRO-3 shards (parameters and optimizer state as element ranges of their tensor-parallel
# shards), to and from every zero stage and another dp.
triax_checkpoint_resume(same_dp2_tp2_zero3 SOURCE dp2_tp2_zero3 RANKS 4 EXACT ${TOPOLOGY_DP2_TP2_ZERO3})
triax_checkpoint_resume(dp2_tp2_zero3_to_single SOURCE dp2_tp2_zero3 RANKS 1 ${TOPOLOGY_111})
triax_checkpoint_resume(dp2_tp2_zero3_to_dp4_zero1 SOURCE dp2_tp2_zero3 RANKS 4 ${TOPOLOGY_DP4_ZERO1})
triax_checkpoint_resume(single_to_dp4_zero3 SOURCE single RANKS 4 ${TOPOLOGY_DP4_ZERO3})
triax_checkpoint_resume(tp2_dp2_zero1_to_dp2_zero3 SOURCE tp2_dp2_zero1 RANKS 2 ${TOPOLOGY_DP2_ZERO3})

# A rank killed at each of the 11 points of a save (docs/reliability.md): `latest` names a complete
# checkpoint, every folder under a final name passes `triax inspect`, and a new run resumes from
# it bit for bit. Three tests: the rank files, then rank 0's commit and keep_last pruning, then the
# points of a save written in the background (its thread's, then the step boundary's commit).
foreach(part rank_files commit async)
  if(part STREQUAL rank_files)
    set(points save_start:1 before_rank_file:0 mid_rank_file:1 before_rank_commit:0 after_rank_file:1
        after_agreement:0 after_agreement:1)
  elseif(part STREQUAL commit)
    set(points before_rename:0 after_rename:0 after_latest:0 mid_prune:0 after_prune:0)
  else()
    set(points save_start:1 before_rank_file:0 mid_rank_file:1 before_rank_commit:0 after_rank_file:1
        after_agreement:1 before_rename:0 after_latest:0 --set checkpoints.async_save=true)
  endif()
  add_test(NAME checkpoint.crash_safety.${part}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint/crash_test.sh $<TARGET_FILE:parity_runner>
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:triax> ${PARITY_CONFIG} ${CHECKPOINT_DIR}/crash_${part} ${points})
  # Two ranks killed and restarted at each save point: mostly process starts (about a quarter of
  # the wall time on CPU), so one core is reserved.
  set_tests_properties(checkpoint.crash_safety.${part} PROPERTIES LABELS "checkpoint;multi_rank;faults"
                       PROCESSORS 1 TIMEOUT 600)
endforeach()

# Background saves overlap training at dp=2 x pp=2 on CPU ranks: the log's stall below the write's
# time for every save (the ranks mostly sleep in the slowed writes, so one core is reserved).
add_test(NAME checkpoint.async_overlap
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint/async_overlap_test.sh $<TARGET_FILE:triax> ${PARITY_CONFIG}
                 ${CHECKPOINT_DIR}/async_overlap)
set_tests_properties(checkpoint.async_overlap PROPERTIES LABELS "checkpoint;multi_rank" PROCESSORS 1 TIMEOUT 300)
