# The benchmark tooling (tools/device): bench.sh run on CPU against a tiny model and a stand-in
# peer, so that the script is known to work before it reaches the GPU machine.
add_test(NAME bench_script
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/bench/bench_script_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR})
set_tests_properties(bench_script PROPERTIES TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=1")

# tools/device/step_profile.py on a hand-made two-step trace: kinds, kernels and idle time.
add_test(NAME step_profile_script
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/bench/step_profile_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(step_profile_script PROPERTIES TIMEOUT 60)

# bench.py --family moe without a GPU (both its triax run and its peer, moe_peer_bench.py, need
# one): a stand-in for the runs; the config and peer it picks, the command lines, the table.
add_test(NAME bench_moe_family
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/bench/bench_moe_family_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(bench_moe_family PROPERTIES TIMEOUT 60)

# The mamba-ssm peers on CPU against a stand-in mamba_ssm package, for Mamba-1 (mamba), Mamba-2
# (mamba2) and the Nemotron-H hybrid (hybrid); all need the .venv's torch.
# ${family}_ssm_peer_script: tools/device/${family}_ssm_peer.py, the model it builds and the JSON
# line bench.py reads (for Mamba-2 and the hybrid also its FLOPs and parameter counts by hand).
# bench_${family}_family: bench.sh --family ${family}, a tiny model against the family's default
# peer over the same stand-in (for Mamba-2 and the hybrid both sides count the same parameters and
# FLOPs).
foreach(family mamba mamba2 hybrid)
  add_test(NAME ${family}_ssm_peer_script
    COMMAND ${PROJECT_SOURCE_DIR}/.venv/bin/python ${CMAKE_CURRENT_LIST_DIR}/bench/${family}_ssm_peer_test.py
            ${PROJECT_SOURCE_DIR})
  set_tests_properties(${family}_ssm_peer_script PROPERTIES TIMEOUT 180 LABELS python ENVIRONMENT "OMP_NUM_THREADS=1")
  add_test(NAME bench_${family}_family
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/bench/bench_mamba_family_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR}
            ${PROJECT_SOURCE_DIR}/.venv/bin/python ${family})
  set_tests_properties(bench_${family}_family PROPERTIES TIMEOUT 300 LABELS python ENVIRONMENT "OMP_NUM_THREADS=1")
endforeach()
