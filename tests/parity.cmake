# The parity matrix: the tiny Llama of parity/tiny_llama_parity.yaml trained 10 steps in fp32 on
# real processes (mpirun, the mpi backend) at many (dp, tp, pp) topologies, every pipeline
# engine (interleaved_1f1b with 2 model chunks per rank), the ZeRO stages 1 and 3 and both
# tensor-parallel modes; each run's losses and final parameters must match the single-rank run's
# within 1e-5 relative. The global batch is the same everywhere (batch_accumulation_per_replica
# = 8 / dp). Every pair of features that can interact appears in at least one case.
add_executable(parity_runner ${CMAKE_CURRENT_LIST_DIR}/parity/parity_runner.cpp)
target_link_libraries(parity_runner PRIVATE triax_comm triax_checkpoint_async triax_log)
target_compile_definitions(parity_runner PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
add_dependencies(parity_runner triax_llama triax_afab triax_1f1b triax_interleaved_1f1b triax_adamw
                 triax_zero1_adamw triax_zero3_adamw)
triax_use_pch(parity_runner)

set(PARITY_CONFIG ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_llama_parity.yaml)
set(PARITY_DIR ${CMAKE_CURRENT_BINARY_DIR}/parity)

add_test(NAME parity.reference
         COMMAND parity_runner run --config ${PARITY_CONFIG} --out ${PARITY_DIR}/reference
                 --set checkpoints.checkpoints_path=${PARITY_DIR}/reference/run)
set_tests_properties(parity.reference PROPERTIES FIXTURES_SETUP parity_reference LABELS parity
                     ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120)

# The same model with 6 layers (8 pipeline blocks), for 8 virtual stages (pp 4 x 2 chunks).
add_test(NAME parity.reference_6_layers
         COMMAND parity_runner run --config ${PARITY_CONFIG} --out ${PARITY_DIR}/reference_6_layers
                 --set checkpoints.checkpoints_path=${PARITY_DIR}/reference_6_layers/run
                 --set model.model_config.num_hidden_layers=6)
set_tests_properties(parity.reference_6_layers PROPERTIES FIXTURES_SETUP parity_reference_6_layers LABELS parity
                     ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120)

# triax_parity_case(<name> DP d TP t PP p ENGINE afab|1f1b|interleaved_1f1b ZERO 0|1|3
#                   MODE ALL_REDUCE|REDUCE_SCATTER [CHUNKS c] [LAYERS 6] [PEAK_LIVE "<per world rank>"]
#                   [OVERLAP] [HELD_SHARE d])
# CHUNKS: parallelism.pp_chunks_per_rank; LAYERS 6: the 6-layer model and its reference;
# OVERLAP: parallelism.tp_linear_async_communication. HELD_SHARE d: every rank holds at most 1/d
# (+10%) of the bytes the single-rank run holds once built (parameters and optimizer state).
function(triax_parity_case name)
  cmake_parse_arguments(ARG "OVERLAP" "DP;TP;PP;ENGINE;ZERO;MODE;CHUNKS;LAYERS;PEAK_LIVE;HELD_SHARE" "" ${ARGN})
  math(EXPR ranks "${ARG_DP} * ${ARG_TP} * ${ARG_PP}")
  math(EXPR accumulation "8 / ${ARG_DP}")
  set(reference reference)
  set(extra "")
  if(ARG_CHUNKS)
    list(APPEND extra --set parallelism.pp_chunks_per_rank=${ARG_CHUNKS})
  endif()
  if(ARG_OVERLAP)
    list(APPEND extra --set parallelism.tp_linear_async_communication=true)
  endif()
  if(ARG_LAYERS)
    set(reference reference_${ARG_LAYERS}_layers)
    list(APPEND extra --set model.model_config.num_hidden_layers=${ARG_LAYERS})
  endif()
  add_test(NAME parity.${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/parity/run_case.sh $<TARGET_FILE:parity_runner> ${MPIEXEC_EXECUTABLE}
                   ${PARITY_CONFIG} ${PARITY_DIR}/${reference} ${PARITY_DIR}/${name} ${ranks}
                   --set parallelism.dp=${ARG_DP} --set parallelism.tp=${ARG_TP} --set parallelism.pp=${ARG_PP}
                   --set parallelism.pp_engine=${ARG_ENGINE} --set parallelism.tp_mode=${ARG_MODE}
                   --set optimizer.zero_stage=${ARG_ZERO}
                   --set tokens.batch_accumulation_per_replica=${accumulation} ${extra})
  set_tests_properties(parity.${name} PROPERTIES FIXTURES_REQUIRED parity_${reference} LABELS "parity;multi_rank"
                       PROCESSORS ${ranks} TIMEOUT 300
                       ENVIRONMENT "PEAK_LIVE=${ARG_PEAK_LIVE};HELD_SHARE=${ARG_HELD_SHARE}")
endfunction()

# A single-rank reference run of another config or setting, as the fixture <fixture>:
#   triax_config_parity_reference(<test name> LABELS <labels> CONFIG <yaml> OUT <dir> FIXTURE <fixture>
#                                 [--set ...]...)
# (the labels first: a keyword ends their list, the overrides follow the last one)
function(triax_config_parity_reference test)
  cmake_parse_arguments(ARG "" "CONFIG;OUT;FIXTURE" "LABELS" ${ARGN})
  add_test(NAME ${test}
           COMMAND parity_runner run --config ${ARG_CONFIG} --out ${ARG_OUT}
                   --set checkpoints.checkpoints_path=${ARG_OUT}/run ${ARG_UNPARSED_ARGUMENTS})
  set_tests_properties(${test} PROPERTIES FIXTURES_SETUP ${ARG_FIXTURE} LABELS "${ARG_LABELS}"
                       ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120)
endfunction()

# The same for another model or setting (through triax_model_parity_case below, mup.cmake, context_parallel.cmake):
#   triax_config_parity_case(<test name> CONFIG <yaml> REFERENCE <dir> FIXTURE <fixture> LABELS <labels>
#                            [CP c] DP d TP t PP p ENGINE afab|1f1b ZERO 0|1 MODE ALL_REDUCE|REDUCE_SCATTER
#                            [AUX_LOSSES] [--set ...]...)
# CP: context_parallel_size (ranks = dp x tp x pp x cp). AUX_LOSSES: also compare the named
# auxiliary losses of metrics.jsonl (moe_case.sh).
function(triax_config_parity_case test)
  cmake_parse_arguments(ARG "AUX_LOSSES" "CONFIG;REFERENCE;FIXTURE;CP;DP;TP;PP;ENGINE;ZERO;MODE" "LABELS" ${ARGN})
  set(cp 1)
  set(cp_setting)
  if(ARG_CP)
    set(cp ${ARG_CP})
    set(cp_setting --set parallelism.context_parallel_size=${ARG_CP})
  endif()
  math(EXPR ranks "${ARG_DP} * ${ARG_TP} * ${ARG_PP} * ${cp}")
  math(EXPR accumulation "8 / ${ARG_DP}")
  get_filename_component(out ${ARG_REFERENCE}/../${test} ABSOLUTE)
  set(runner ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/parity/run_case.sh)
  if(ARG_AUX_LOSSES)
    set(runner ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/parity/moe_case.sh ${TRIAX_TEST_PYTHON})
  endif()
  add_test(NAME ${test}
           COMMAND ${runner} $<TARGET_FILE:parity_runner>
                   ${MPIEXEC_EXECUTABLE} ${ARG_CONFIG} ${ARG_REFERENCE} ${out} ${ranks} ${cp_setting}
                   --set parallelism.dp=${ARG_DP} --set parallelism.tp=${ARG_TP} --set parallelism.pp=${ARG_PP}
                   --set parallelism.pp_engine=${ARG_ENGINE} --set parallelism.tp_mode=${ARG_MODE}
                   --set optimizer.zero_stage=${ARG_ZERO}
                   --set tokens.batch_accumulation_per_replica=${accumulation} ${ARG_UNPARSED_ARGUMENTS})
  set_tests_properties(${test} PROPERTIES FIXTURES_REQUIRED ${ARG_FIXTURE} LABELS "${ARG_LABELS}"
                       PROCESSORS ${ranks} TIMEOUT 300)
endfunction()

# Another model's matrix (mamba_parity.cmake, mamba2.cmake): its plugin built for parity_runner and
# its single-rank run of CONFIG, <prefix>.reference (fixture <prefix>_reference, in <prefix>/reference
# of this build folder), labelled parity and LABEL; then its cases against that run, through
# triax_config_parity_case, labelled parity, multi_rank and LABEL:
#   triax_model_parity_reference(<prefix> PLUGIN <target> CONFIG <yaml> LABEL <label>)
#   triax_model_parity_case(<prefix> <name> CONFIG <yaml> LABEL <label> DP d TP t PP p ENGINE e ZERO z MODE m
#                           [--set ...]...)
function(triax_model_parity_reference prefix)
  cmake_parse_arguments(ARG "" "PLUGIN;CONFIG;LABEL" "" ${ARGN})
  add_dependencies(parity_runner ${ARG_PLUGIN})
  set(reference ${CMAKE_CURRENT_BINARY_DIR}/${prefix}/reference)
  add_test(NAME ${prefix}.reference
           COMMAND parity_runner run --config ${ARG_CONFIG} --out ${reference}
                   --set checkpoints.checkpoints_path=${reference}/run)
  set_tests_properties(${prefix}.reference PROPERTIES FIXTURES_SETUP ${prefix}_reference
                       LABELS "parity;${ARG_LABEL}" ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120)
endfunction()

function(triax_model_parity_case prefix name)
  cmake_parse_arguments(ARG "" "CONFIG;LABEL" "" ${ARGN})
  triax_config_parity_case(${prefix}.${name} CONFIG ${ARG_CONFIG} REFERENCE ${CMAKE_CURRENT_BINARY_DIR}/${prefix}/reference
                           FIXTURE ${prefix}_reference LABELS parity multi_rank ${ARG_LABEL} ${ARG_UNPARSED_ARGUMENTS})
endfunction()

# Data parallel alone, with and without ZeRO-1.
triax_parity_case(dp2           DP 2 TP 1 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_parity_case(dp2_zero1     DP 2 TP 1 PP 1 ENGINE afab ZERO 1 MODE ALL_REDUCE)
triax_parity_case(dp4_zero1     DP 4 TP 1 PP 1 ENGINE afab ZERO 1 MODE ALL_REDUCE)
# ZeRO-3: parameters sharded over dp, gathered around each block's forward and backward, gradients
# reduce-scattered into the shards (docs/zero3.md); with tp, with pp (the tied embedding's shards
# summed across stages) and with the data-parallel group split unevenly (dp 4: 4 does not divide
# every parameter, so the last ranks' shards are short).
triax_parity_case(dp2_zero3          DP 2 TP 1 PP 1 ENGINE afab ZERO 3 MODE ALL_REDUCE)
triax_parity_case(dp4_zero3          DP 4 TP 1 PP 1 ENGINE afab ZERO 3 MODE ALL_REDUCE HELD_SHARE 4)
triax_parity_case(dp2_tp2_sp_zero3   DP 2 TP 2 PP 1 ENGINE afab ZERO 3 MODE REDUCE_SCATTER)
triax_parity_case(dp2_pp2_1f1b_zero3 DP 2 TP 1 PP 2 ENGINE 1f1b ZERO 3 MODE ALL_REDUCE)
# Tensor parallel alone, both modes.
triax_parity_case(tp2           DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE)
triax_parity_case(tp2_sp        DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE REDUCE_SCATTER)
triax_parity_case(tp4_sp        DP 1 TP 4 PP 1 ENGINE afab ZERO 0 MODE REDUCE_SCATTER)
# ... with the collectives overlapping the column-parallel GEMMs (tp_linear_async_communication).
triax_parity_case(tp2_overlap    DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE OVERLAP)
triax_parity_case(tp4_sp_overlap DP 1 TP 4 PP 1 ENGINE afab ZERO 0 MODE REDUCE_SCATTER OVERLAP)
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
triax_parity_case(tp2_pp2_sp_1f1b_overlap DP 1 TP 2 PP 2 ENGINE 1f1b ZERO 0 MODE REDUCE_SCATTER OVERLAP)
triax_parity_case(tp2_pp4_afab        DP 1 TP 2 PP 4 ENGINE afab ZERO 0 MODE ALL_REDUCE)
# All three at once.
triax_parity_case(dp2_tp2_pp2_sp_1f1b_zero1 DP 2 TP 2 PP 2 ENGINE 1f1b ZERO 1 MODE REDUCE_SCATTER)
triax_parity_case(dp2_tp2_pp2_afab          DP 2 TP 2 PP 2 ENGINE afab ZERO 0 MODE ALL_REDUCE)
# Interleaved 1F1B, 2 model chunks per rank: each rank holds two runs of blocks, the last rank
# feeds rank 0's second chunk. (chunk, micro-batch) pairs in flight as Megatron's warm-up gives
# them: (pp - rank - 1) * 2 + (chunks - 1) * pp, plus one. With dp, tp, sequence parallelism,
# ZeRO-1 and the data-parallel overlap (mpi has asynchronous collectives) at pp 2; alone at pp 4.
triax_parity_case(dp2_tp2_pp2_sp_interleaved_zero1 DP 2 TP 2 PP 2 ENGINE interleaved_1f1b CHUNKS 2 ZERO 1
                  MODE REDUCE_SCATTER PEAK_LIVE "5 5 3 3 5 5 3 3")
triax_parity_case(dp2_pp2_interleaved DP 2 TP 1 PP 2 ENGINE interleaved_1f1b CHUNKS 2 ZERO 0 MODE ALL_REDUCE
                  PEAK_LIVE "5 3 5 3")
triax_parity_case(pp4_interleaved DP 1 TP 1 PP 4 ENGINE interleaved_1f1b CHUNKS 2 LAYERS 6 ZERO 0 MODE ALL_REDUCE
                  PEAK_LIVE "11 9 7 5")
# The MLP activation recomputed in backward (selective recomputation) with dp, sequence-parallel
# tp and ZeRO-1, and beside whole layers recomputed at pp 2.
triax_config_parity_case(parity.dp2_tp2_sp_recompute_mlp_activation CONFIG ${PARITY_CONFIG}
                         REFERENCE ${PARITY_DIR}/reference FIXTURE parity_reference LABELS "parity;multi_rank"
                         DP 2 TP 2 PP 1 ENGINE afab ZERO 1 MODE REDUCE_SCATTER
                         --set parallelism.recompute_mlp_activation=true)
triax_config_parity_case(parity.pp2_recompute_layer_and_mlp_activation CONFIG ${PARITY_CONFIG}
                         REFERENCE ${PARITY_DIR}/reference FIXTURE parity_reference LABELS "parity;multi_rank"
                         DP 1 TP 1 PP 2 ENGINE 1f1b ZERO 0 MODE ALL_REDUCE
                         --set parallelism.recompute_mlp_activation=true --set parallelism.recompute_layer=true
                         --set parallelism.recompute_num_layers=1)
