# The benchmark tooling (tools/device): bench.sh run on CPU against a tiny model and a stand-in
# peer, so that the script is known to work before it reaches the GPU machine.
add_test(NAME bench_script
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/bench/bench_script_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR})
set_tests_properties(bench_script PROPERTIES TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=1")

# tools/device/step_profile.py on a hand-made two-step trace: kinds, kernels and idle time.
add_test(NAME step_profile_script
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/bench/step_profile_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(step_profile_script PROPERTIES TIMEOUT 60)

# tools/device/mamba_ssm_peer.py (the Mamba peer) on CPU against a stand-in mamba_ssm package:
# the config it builds and the JSON line bench.py reads. Needs the .venv's torch.
add_test(NAME mamba_ssm_peer_script
  COMMAND ${PROJECT_SOURCE_DIR}/.venv/bin/python ${CMAKE_CURRENT_LIST_DIR}/bench/mamba_ssm_peer_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(mamba_ssm_peer_script PROPERTIES TIMEOUT 180 LABELS python ENVIRONMENT "OMP_NUM_THREADS=1")
# bench.sh --family mamba on CPU: a tiny Mamba against the default peer over the same stand-in.
add_test(NAME bench_mamba_family
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/bench/bench_mamba_family_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR}
          ${PROJECT_SOURCE_DIR}/.venv/bin/python)
set_tests_properties(bench_mamba_family PROPERTIES TIMEOUT 300 LABELS python ENVIRONMENT "OMP_NUM_THREADS=1")
# tools/device/mamba2_ssm_peer.py (the Mamba-2 peer) on CPU against the same stand-in: the config
# it builds from a benchmark config, its JSON line, its FLOPs and parameter counts by hand.
add_test(NAME mamba2_ssm_peer_script
  COMMAND ${PROJECT_SOURCE_DIR}/.venv/bin/python ${CMAKE_CURRENT_LIST_DIR}/bench/mamba2_ssm_peer_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(mamba2_ssm_peer_script PROPERTIES TIMEOUT 180 LABELS python ENVIRONMENT "OMP_NUM_THREADS=1")
# bench.sh --family mamba2 on CPU: a tiny Mamba-2 against its peer; both count the same
# parameters and FLOPs.
add_test(NAME bench_mamba2_family
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/bench/bench_mamba2_family_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR}
          ${PROJECT_SOURCE_DIR}/.venv/bin/python)
set_tests_properties(bench_mamba2_family PROPERTIES TIMEOUT 300 LABELS python ENVIRONMENT "OMP_NUM_THREADS=1")
