# Generation (`triax generate`, docs/generation.md): the sampling rules and the generation loop
# over the Llama plugin's cache (cached = uncached, ragged batch = each alone, seeds, top-k 1 =
# greedy, EOS, context refusals); the command line on a tiny trained checkpoint (the README's
# command as written, bad input, tp 2 = tp 1 under mpirun); greedy tokens equal to transformers'
# generate() on the exported model, from token ids and from text through tokenizer.json.
add_executable(generation_test ${CMAKE_CURRENT_LIST_DIR}/generation_test.cpp)
target_link_libraries(generation_test PRIVATE triax_generate GTest::gtest_main)
target_compile_definitions(generation_test PRIVATE TRIAX_TEST_PLUGIN_DIR="${TRIAX_PLUGIN_OUTPUT_DIRECTORY}")
add_dependencies(generation_test triax_llama)
triax_use_pch(generation_test)
triax_discover_test_suites(generation_test PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1")

# One tiny checkpoint (the quickstart's config, 20 steps) for the command-line tests.
set(GENERATE_WORK ${CMAKE_CURRENT_BINARY_DIR}/generate_cli)
set(GENERATE_CLI ${CMAKE_CURRENT_LIST_DIR}/generate_cli_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR} ${GENERATE_WORK})
add_test(NAME generate_checkpoint_setup COMMAND ${GENERATE_CLI} setup)
set_tests_properties(generate_checkpoint_setup PROPERTIES FIXTURES_SETUP generate_checkpoint TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME generate_readme_command COMMAND ${GENERATE_CLI} readme)
add_test(NAME generate_bad_input COMMAND ${GENERATE_CLI} bad_input ${TRIAX_TEST_PLUGINS_DIR}/expert_toy)
set_tests_properties(generate_readme_command generate_bad_input PROPERTIES FIXTURES_REQUIRED generate_checkpoint
                     TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME generate_tp2_matches_tp1 COMMAND ${GENERATE_CLI} tp2)
set_tests_properties(generate_tp2_matches_tp1 PROPERTIES FIXTURES_REQUIRED generate_checkpoint TIMEOUT 300
                     PROCESSORS 2 LABELS multi_rank
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")
add_dependencies(generation_test test_plugin_expert_toy)

add_test(NAME generate_matches_transformers
         COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/interop/generate_test.py $<TARGET_FILE:triax>
                 ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/generate_hf)
set_tests_properties(generate_matches_transformers PROPERTIES LABELS python TIMEOUT 600
                     ENVIRONMENT "OMP_NUM_THREADS=1;HF_HUB_OFFLINE=1")

# --cuda-graphs on one GPU: the same tokens as without graphs, and graph launches in the trace,
# for Llama, for Mamba (its decoding step's fused kernels, states written in place) and for MoE. One at a
# time: the script's runs take one rendezvous port.
if(TRIAX_CUDA)
  add_test(NAME gpu_generate_cuda_graphs_equal
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/gpu/generate_cuda_graphs_equal.sh $<TARGET_FILE:triax>
                   ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_llama_parity.yaml ${CMAKE_CURRENT_BINARY_DIR}/generate_cuda_graphs)
  add_test(NAME gpu_generate_cuda_graphs_equal_mamba
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/gpu/generate_cuda_graphs_equal.sh $<TARGET_FILE:triax>
                   ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_mamba_parity.yaml
                   ${CMAKE_CURRENT_BINARY_DIR}/generate_cuda_graphs_mamba)
  # MoE: two prompts, 4 (token, slot) rows of top-2 over 4 experts, served by expert (no host wait).
  add_test(NAME gpu_generate_cuda_graphs_equal_moe
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/gpu/generate_cuda_graphs_equal.sh $<TARGET_FILE:triax>
                   ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_moe_parity.yaml
                   ${CMAKE_CURRENT_BINARY_DIR}/generate_cuda_graphs_moe 1,2,3 4,5,6,7,8,9)
  set_tests_properties(gpu_generate_cuda_graphs_equal_moe PROPERTIES ENVIRONMENT "NEW_TOKENS=24")  # 32 positions
  set_tests_properties(gpu_generate_cuda_graphs_equal gpu_generate_cuda_graphs_equal_mamba
                       gpu_generate_cuda_graphs_equal_moe PROPERTIES
                       LABELS gpu TIMEOUT 300 RESOURCE_LOCK generate_cuda_graphs_port)
endif()
