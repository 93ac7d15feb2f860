# The Mamba selective scan, causal conv1d and decoding step (plugins/models/mamba/scan).
# MambaScanCpu, MambaDecodeStepCpu: the LibTorch reference against double loops, everywhere.
# MambaScanCuda, MambaDecodeStepCuda (label gpu): the CUDA kernels against the reference, skipped
# without a GPU.
add_executable(mamba_scan_test ${CMAKE_CURRENT_LIST_DIR}/mamba_scan_test.cpp ${CMAKE_CURRENT_LIST_DIR}/mamba_scan_cuda_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/mamba_decode_step_test.cpp)
target_link_libraries(mamba_scan_test PRIVATE triax_mamba_scan GTest::gtest_main)
if(TRIAX_CUDA)  # every variant of the backward kernel, through its launcher
  target_sources(mamba_scan_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/mamba_scan_backward_variants_test.cpp)
endif()
triax_use_pch(mamba_scan_test)
triax_discover_test_suites(mamba_scan_test TEST_FILTER "*Cpu.*" TEST_LIST mamba_scan_test_cpu)
triax_discover_test_suites(mamba_scan_test TEST_FILTER "*Cuda.*" TEST_LIST mamba_scan_test_cuda PROPERTIES LABELS gpu)

# Time and achieved memory bandwidth of the kernels at Mamba-130m shapes, with --peer mamba-ssm's
# selective_scan_fn on the same tensors (built, not run by ctest).
if(TRIAX_CUDA)
  add_executable(mamba_scan_bench ${CMAKE_CURRENT_LIST_DIR}/mamba_scan_bench.cpp ${CMAKE_CURRENT_LIST_DIR}/mamba_scan_peer_times.cpp)
  target_link_libraries(mamba_scan_bench PRIVATE triax_mamba_scan nlohmann_json::nlohmann_json)
  target_compile_definitions(mamba_scan_bench PRIVATE
    TRIAX_MAMBA_SCAN_PEER_SCRIPT="${PROJECT_SOURCE_DIR}/tools/device/mamba_scan_peer.py")
  triax_use_pch(mamba_scan_bench)
  add_dependencies(triax_benches mamba_scan_bench)
endif()
