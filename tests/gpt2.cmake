# The GPT-2 example of sdk/examples/gpt2 as its users get it (after parity.cmake, hf_export.cmake
# and plugins.cmake, whose parity_runner, run_case.sh, triax_logits and out-of-tree arguments it
# uses):
#   gpt2.build                  installs this build into a clean prefix and builds the example's own
#                               CMake project against it (find_package(triax));
#   gpt2.other_sdk_version      the example configured against an SDK of another version is refused,
#                               naming the package and both versions;
#   gpt2.parity.*               trained 10 steps in fp32, the plugin loaded by name from YAML through
#                               plugins.paths, at tp 2 x pp 2 (4 ranks, mpirun) in both tp modes:
#                               losses, gradient norms and final parameters within 1e-5 of one rank's;
#   gpt2.hf_transformers        export, import and greedy generation against transformers' GPT2LMHeadModel.
# Building needs the whole triax build (cmake --install), so it is labelled slow like out_of_tree_plugin.
set(GPT2_WORK_DIR ${CMAKE_BINARY_DIR}/test_plugins/gpt2)
set(GPT2_PLUGIN_DIR ${GPT2_WORK_DIR}/build)
set(GPT2_CONFIG ${CMAKE_CURRENT_LIST_DIR}/gpt2/tiny_gpt2_parity.yaml)
set(GPT2_PARITY_DIR ${CMAKE_CURRENT_BINARY_DIR}/gpt2_parity)

add_test(NAME gpt2.build
  COMMAND ${CMAKE_COMMAND} ${TRIAX_OUT_OF_TREE_ARGS} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}/sdk/examples/gpt2
          -DWORK_DIR=${GPT2_WORK_DIR} -P ${CMAKE_CURRENT_LIST_DIR}/gpt2/build_example.cmake)
set_tests_properties(gpt2.build PROPERTIES FIXTURES_SETUP gpt2_plugin LABELS "gpt2;slow" TIMEOUT 900)

add_test(NAME gpt2.other_sdk_version
  COMMAND ${CMAKE_COMMAND} ${TRIAX_OUT_OF_TREE_ARGS} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}/sdk/examples/gpt2
          -DWORK_DIR=${GPT2_WORK_DIR} -P ${CMAKE_CURRENT_LIST_DIR}/gpt2/other_sdk_version.cmake)
set_tests_properties(gpt2.other_sdk_version PROPERTIES FIXTURES_REQUIRED gpt2_plugin LABELS "gpt2;slow" TIMEOUT 300)

add_test(NAME gpt2.parity.reference
         COMMAND parity_runner run --config ${GPT2_CONFIG} --out ${GPT2_PARITY_DIR}/reference
                 --set checkpoints.checkpoints_path=${GPT2_PARITY_DIR}/reference/run
                 --set plugins.paths=[${GPT2_PLUGIN_DIR}])
set_tests_properties(gpt2.parity.reference PROPERTIES FIXTURES_REQUIRED gpt2_plugin
                     FIXTURES_SETUP gpt2_parity_reference LABELS "gpt2;slow" ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120)

# triax_gpt2_parity_case(<name> ENGINE afab|1f1b MODE ALL_REDUCE|REDUCE_SCATTER [--set ...]...): tp 2 x pp 2.
function(triax_gpt2_parity_case name)
  cmake_parse_arguments(ARG "" "ENGINE;MODE" "" ${ARGN})
  add_test(NAME gpt2.parity.${name}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/parity/run_case.sh $<TARGET_FILE:parity_runner> ${MPIEXEC_EXECUTABLE}
                   ${GPT2_CONFIG} ${GPT2_PARITY_DIR}/reference ${GPT2_PARITY_DIR}/${name} 4
                   --set plugins.paths=[${GPT2_PLUGIN_DIR}] --set parallelism.tp=2 --set parallelism.pp=2
                   --set parallelism.pp_engine=${ARG_ENGINE} --set parallelism.tp_mode=${ARG_MODE}
                   ${ARG_UNPARSED_ARGUMENTS})
  set_tests_properties(gpt2.parity.${name} PROPERTIES FIXTURES_REQUIRED "gpt2_plugin;gpt2_parity_reference"
                       LABELS "gpt2;slow;multi_rank" PROCESSORS 4 TIMEOUT 300)
endfunction()
triax_gpt2_parity_case(tp2_pp2_afab    ENGINE afab MODE ALL_REDUCE)
triax_gpt2_parity_case(tp2_pp2_sp_1f1b ENGINE 1f1b MODE REDUCE_SCATTER)
triax_gpt2_parity_case(tp2_pp2_sp_1f1b_overlap ENGINE 1f1b MODE REDUCE_SCATTER
                       --set parallelism.tp_linear_async_communication=true)

add_test(NAME gpt2.hf_transformers
         COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/gpt2/hf_gpt2_test.py
                 $<TARGET_FILE:triax> $<TARGET_FILE:triax_logits> ${GPT2_CONFIG} ${GPT2_PLUGIN_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/gpt2_hf)
set_tests_properties(gpt2.hf_transformers PROPERTIES FIXTURES_REQUIRED gpt2_plugin LABELS "gpt2;python;slow"
                     TIMEOUT 600 ENVIRONMENT "OMP_NUM_THREADS=1;HF_HUB_OFFLINE=1")
