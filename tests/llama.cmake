# The llama model plugin's unit tests (included from tests/CMakeLists.txt: include(llama.cmake)).
# They link the model code directly (triax_llama_impl), not through the plugin loader.
# With them, in the same program (LibTorch's headers compiled once): document masking and the
# sliding window (packed documents against each alone, the window against an explicit-mask
# reference, cached generation past the window, the refusals of a bad window), and activation
# recomputation (the SDK's recompute() and the Llama layers with recompute_layer).
add_executable(llama_test
  ${CMAKE_CURRENT_LIST_DIR}/llama_components_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/llama_model_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/llama_config_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention_mask_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recompute_test.cpp)
target_link_libraries(llama_test PRIVATE triax_llama_impl GTest::gtest_main)
triax_use_pch(llama_test)
triax_discover_test_suites(llama_test)

# ZeRO-3 blocks (triax/layers/zero3_layer.hpp) and side outputs carried out of them and out of
# recompute() (triax/layers/side_outputs.hpp), on one process.
# In sdk_test (tests/sdk_test.cmake).
target_sources(sdk_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/zero3_layer_test.cpp ${CMAKE_CURRENT_LIST_DIR}/side_outputs_test.cpp)
