# The MoE block library (plugins/models/moe_block) with the routing and experts of DeepSeek-V3 and
# Nemotron-H: against transformers' NemotronHMoE on the same weights, loaded through the block's
# Hugging Face rules (fp32 CPU, 1e-5), and at ep 2 on real processes against one rank (outputs,
# router statistics, gradients, both dispatchers). Label: moe.
add_executable(nemotron_h_moe_check ${CMAKE_CURRENT_LIST_DIR}/moe_block/nemotron_h_moe_check.cpp)
target_link_libraries(nemotron_h_moe_check PRIVATE triax_moe_block triax_interop)
triax_use_pch(nemotron_h_moe_check)
add_test(NAME moe_block.nemotron_h_moe_matches_transformers
         COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/moe_block/nemotron_h_moe_test.py
                 $<TARGET_FILE:nemotron_h_moe_check> ${CMAKE_CURRENT_BINARY_DIR}/moe_block_nemotron_h)
set_tests_properties(moe_block.nemotron_h_moe_matches_transformers PROPERTIES LABELS "python;moe" TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1")

target_sources(multi_rank_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/moe_block/moe_block_expert_parallel_test.cpp)
target_link_libraries(multi_rank_test PRIVATE triax_moe_block)
triax_add_multi_rank_suites(NAME moe_block.expert_parallel_2_ranks RANKS 2 SUITES MoeBlockExpertParallel TIMEOUT 120)
set_property(TEST moe_block.expert_parallel_2_ranks APPEND PROPERTY LABELS moe expert_parallel)
