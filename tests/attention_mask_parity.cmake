# Document masking and the sliding window at tp 2 and pp 2 (included after parity.cmake, whose
# parity_runner and run_case.sh it uses): the tiny Llama trained 10 steps in fp32 on a token
# folder of short documents with model_config._use_doc_masking and sliding_window_size 6, on real
# processes (mpirun), against its single-rank run (losses, gradient norms, final parameters within
# 1e-5 relative). The position_ids reach every pipeline stage through the engines.
set(DOC_MASKING_DIR ${CMAKE_CURRENT_BINARY_DIR}/doc_masking_parity)
set(DOC_MASKING_SETTINGS
    --set "data_stages.0.data.dataset={dataset_folder: ${DOC_MASKING_DIR}/documents}"
    --set model.model_config._use_doc_masking=true --set model.model_config.sliding_window_size=6)

add_test(NAME doc_masking_parity.documents
         COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/parity/write_documents.py ${DOC_MASKING_DIR}/documents)
set_tests_properties(doc_masking_parity.documents PROPERTIES FIXTURES_SETUP doc_masking_documents LABELS parity)

add_test(NAME doc_masking_parity.reference
         COMMAND parity_runner run --config ${PARITY_CONFIG} --out ${DOC_MASKING_DIR}/reference
                 --set checkpoints.checkpoints_path=${DOC_MASKING_DIR}/reference/run ${DOC_MASKING_SETTINGS})
set_tests_properties(doc_masking_parity.reference PROPERTIES FIXTURES_REQUIRED doc_masking_documents
                     FIXTURES_SETUP doc_masking_reference LABELS parity ENVIRONMENT "OMP_NUM_THREADS=1"
                     TIMEOUT 120)

triax_config_parity_case(doc_masking_parity.tp2 CONFIG ${PARITY_CONFIG} REFERENCE ${DOC_MASKING_DIR}/reference
                         FIXTURE doc_masking_reference LABELS parity multi_rank
                         DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE ALL_REDUCE ${DOC_MASKING_SETTINGS})
triax_config_parity_case(doc_masking_parity.tp2_sp CONFIG ${PARITY_CONFIG} REFERENCE ${DOC_MASKING_DIR}/reference
                         FIXTURE doc_masking_reference LABELS parity multi_rank
                         DP 1 TP 2 PP 1 ENGINE afab ZERO 0 MODE REDUCE_SCATTER ${DOC_MASKING_SETTINGS})
triax_config_parity_case(doc_masking_parity.pp2_1f1b CONFIG ${PARITY_CONFIG} REFERENCE ${DOC_MASKING_DIR}/reference
                         FIXTURE doc_masking_reference LABELS parity multi_rank
                         DP 1 TP 1 PP 2 ENGINE 1f1b ZERO 0 MODE ALL_REDUCE ${DOC_MASKING_SETTINGS})

# Not vacuous: the same run without document masking (the window kept) trains to other losses, so
# the positions did reach the model.
add_test(NAME doc_masking_parity.unmasked
         COMMAND parity_runner run --config ${PARITY_CONFIG} --out ${DOC_MASKING_DIR}/unmasked
                 --set checkpoints.checkpoints_path=${DOC_MASKING_DIR}/unmasked/run ${DOC_MASKING_SETTINGS}
                 --set model.model_config._use_doc_masking=false)
set_tests_properties(doc_masking_parity.unmasked PROPERTIES FIXTURES_REQUIRED doc_masking_documents
                     FIXTURES_SETUP doc_masking_unmasked LABELS parity ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120)
add_test(NAME doc_masking_parity.masking_changes_the_losses
         COMMAND parity_runner compare --reference ${DOC_MASKING_DIR}/reference --candidate ${DOC_MASKING_DIR}/unmasked
                 --losses-only 1)
set_tests_properties(doc_masking_parity.masking_changes_the_losses PROPERTIES
                     FIXTURES_REQUIRED "doc_masking_reference;doc_masking_unmasked" LABELS parity
                     PASS_REGULAR_EXPRESSION "losses.*step 1: .* vs reference")
