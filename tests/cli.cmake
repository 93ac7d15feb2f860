add_test(NAME cli COMMAND ${CMAKE_CURRENT_LIST_DIR}/cli_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli PROPERTIES TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")

# The model's shape as a new user meets it: keys given beside a Hugging Face folder laid over its
# config.json (a key changing a weight's shape refused, naming both), and a model beyond the free
# memory refused at once with the numbers, never killed by the kernel.
add_test(NAME model_shape_guards
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/model_shape_guards_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR})
set_tests_properties(model_shape_guards PROPERTIES LABELS "cli;qwen3" TIMEOUT 120)
