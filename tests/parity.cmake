# The parity matrix: the tiny Llama of parity/tiny_llama_parity.yaml trained 10 steps in fp32 on
# real processes (mpirun, the mpi backend) at many (dp, tp, pp) topologies, both pipeline
# engines, both ZeRO stages and both tensor-parallel modes; each run's losses and final
# parameters must match the single-rank run's within 1e-5 relative. The global batch is the
# same everywhere (batch_accumulation_per_replica = 8 / dp). Every pair of features that can
# interact appears in at least one case.
add_executable(parity_runner ${CMAKE_CURRENT_LIST_DIR}/parity/parity_runner.cpp)
target_link_libraries(parity_runner PRIVATE triax_core)
target_compile_definitions(parity_runner PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
add_dependencies(parity_runner triax_llama triax_afab triax_1f1b triax_adamw triax_zero1_adamw)
triax_use_pch(parity_runner)

set(PARITY_CONFIG ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_llama_parity.yaml)
set(PARITY_DIR ${CMAKE_CURRENT_BINARY_DIR}/parity)

add_test(NAME parity.reference
         COMMAND parity_runner run --config ${PARITY_CONFIG} --out ${PARITY_DIR}/reference
                 --set checkpoints.checkpoints_path=${PARITY_DIR}/reference/run)
set_tests_properties(parity.reference PROPERTIES FIXTURES_SETUP parity_reference LABELS parity
                     ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120)

# triax_parity_case(<name> DP d TP t PP p ENGINE afab|1f1b ZERO 0|1 MODE ALL_REDUCE|REDUCE_SCATTER
#                   [PEAK_LIVE "<per world rank>"])
function(triax_parity_case name)
  cmake_parse_arguments(ARG "" "DP;TP;PP;ENGINE;ZERO;MODE;PEAK_LIVE" "" ${ARGN})
  math(EXPR ranks "${ARG_DP} * ${ARG_TP} * ${ARG_PP}")
  math(EXPR accumulation "8 / ${ARG_DP}")
  add_test(NAME parity.${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/parity/run_case.sh $<TARGET_FILE:parity_runner> ${MPIEXEC_EXECUTABLE}
                   ${PARITY_CONFIG} ${PARITY_DIR}/reference ${PARITY_DIR}/${name} ${ranks}
                   --set parallelism.dp=${ARG_DP} --set parallelism.tp=${ARG_TP} --set parallelism.pp=${ARG_PP}
                   --set parallelism.pp_engine=${ARG_ENGINE} --set parallelism.tp_mode=${ARG_MODE}
                   --set optimizer.zero_stage=${ARG_ZERO}
                   --set tokens.batch_accumulation_per_replica=${accumulation})
  set_tests_properties(parity.${name} PROPERTIES FIXTURES_REQUIRED parity_reference LABELS "parity;multi_rank"
                       PROCESSORS ${ranks} TIMEOUT 300 ENVIRONMENT "PEAK_LIVE=${ARG_PEAK_LIVE}")
endfunction()

# Data parallel alone, with and without ZeRO-1.
triax_parity_case(dp2           DP 2 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_parity_case(dp2_zero1     DP 2 TP 1 PP 1 ENGINE afab ZERO 1 MODE ALL_REDUCE)
triax_parity_case(dp4_zero1     DP 4 TP 1 PP 1 ENGINE afab ZERO 1 MODE ALL_REDUCE)
# Tensor parallel alone, both modes.
triax_parity_case(tp2           DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_parity_case(tp2_sp        DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE REDUCE_SCATTER)
triax_parity_case(tp4_sp        DP 1 TP 4 PP 1 ENGINE afab ZERO 0 MODE REDUCE_SCATTER)
# Pipeline alone, both engines; the measured micro-batches in flight per stage.
triax_parity_case(pp2_afab      DP 1 TP 1 PP 2 ENGINE afab ZERO 0 MODE ALL_REDUCE PEAK_LIVE "8 8")
triax_parity_case(pp4_1f1b      DP 1 TP 1 PP 4 ENGINE 1f1b ZERO 0 MODE ALL_REDUCE PEAK_LIVE "4 3 2 1")
# Pairs: dp x tp, dp x pp, tp x pp, with ZeRO-1, both modes and both engines in the mix.
triax_parity_case(dp2_tp2_sp_zero1    DP 2 TP 2 PP 1 ENGINE afab ZERO 1 MODE REDUCE_SCATTER)
triax_parity_case(dp4_tp2_zero1       DP 4 TP 2 PP 1 ENGINE afab ZERO 1 MODE ALL_REDUCE)
triax_parity_case(dp2_tp4             DP 2 TP 4 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_parity_case(dp2_pp2_1f1b_zero1  DP 2 TP 1 PP 2 ENGINE 1f1b ZERO 1 MODE ALL_REDUCE)
triax_parity_case(dp4_pp2_afab        DP 4 TP 1 PP 2 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_parity_case(dp2_pp4_1f1b_zero1  DP 2 TP 1 PP 4 ENGINE 1f1b ZERO 1 MODE ALL_REDUCE PEAK_LIVE "4 3 2 1 4 3 2 1")
triax_parity_case(tp2_pp2_1f1b        DP 1 TP 2 PP 2 ENGINE 1f1b ZERO 0 MODE ALL_REDUCE)
triax_parity_case(tp2_pp2_sp_afab     DP 1 TP 2 PP 2 ENGINE afab ZERO 0 MODE REDUCE_SCATTER)
triax_parity_case(tp4_pp2_sp_1f1b     DP 1 TP 4 PP 2 ENGINE 1f1b ZERO 0 MODE REDUCE_SCATTER)
triax_parity_case(tp2_pp4_afab        DP 1 TP 2 PP 4 ENGINE afab ZERO 0 MODE ALL_REDUCE)
# All three at once.
triax_parity_case(dp2_tp2_pp2_sp_1f1b_zero1 DP 2 TP 2 PP 2 ENGINE 1f1b ZERO 1 MODE REDUCE_SCATTER)
triax_parity_case(dp2_tp2_pp2_afab          DP 2 TP 2 PP 2 ENGINE afab ZERO 0 MODE ALL_REDUCE)
