# Runtime faults (docs/reliability.md), each test labelled `faults`: numerical faults in one
# process (faults_test.cpp, in core_test); preemption, rank deaths, crashes at every point of a save, a full disk
# and error propagation on real processes (tests/faults/*.sh, through `triax launch`); the soak
# run (label slow).
target_sources(core_test PRIVATE faults_test.cpp)  # tests/core_test.cmake
target_compile_definitions(core_test PRIVATE TRIAX_PARITY_CONFIG="${CMAKE_CURRENT_LIST_DIR}/parity/tiny_llama_parity.yaml")
add_dependencies(core_test triax_llama triax_afab triax_adamw)
triax_add_area_suites(core_test SUITES FaultInjection.* NonFinitePolicy.* PROPERTIES TIMEOUT 300 LABELS faults
                      ENVIRONMENT "OMP_NUM_THREADS=1")

set(FAULTS_CONFIG ${CMAKE_CURRENT_LIST_DIR}/parity/tiny_llama_parity.yaml)
set(FAULTS_DIR ${CMAKE_CURRENT_BINARY_DIR}/faults)
set(FAULTS_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/faults)
# triax_fault_test(<name> PROCESSORS n LABELS ... COMMAND script [args...]). PROCESSORS is the
# cores the test keeps busy, not the processes it starts: the trials below spend most of their
# time in process starts and in the communication timeout (measured: 5 to 7 s of CPU in 20 s for
# a rank-death test of 2 to 4 ranks), so one core is reserved and other tests run beside them.
function(triax_fault_test name)
  cmake_parse_arguments(ARG "" "PROCESSORS;TIMEOUT" "LABELS;COMMAND" ${ARGN})
  add_test(NAME faults.${name} COMMAND ${ARG_COMMAND})
  set_tests_properties(faults.${name} PROPERTIES LABELS "faults;multi_rank;${ARG_LABELS}" PROCESSORS ${ARG_PROCESSORS}
                       TIMEOUT ${ARG_TIMEOUT} SKIP_RETURN_CODE 77)
endfunction()

triax_fault_test(preemption.signals PROCESSORS 1 TIMEOUT 300
                 COMMAND ${FAULTS_SCRIPTS}/preemption_test.sh $<TARGET_FILE:triax> ${FAULTS_CONFIG}
                         ${FAULTS_DIR}/preemption_signals dp2_sigterm tp2_launcher_sigterm)
triax_fault_test(preemption.pp_and_second_signal PROCESSORS 1 TIMEOUT 300
                 COMMAND ${FAULTS_SCRIPTS}/preemption_test.sh $<TARGET_FILE:triax> ${FAULTS_CONFIG}
                         ${FAULTS_DIR}/preemption_pp pp2_sigusr1 second_signal)
triax_fault_test(preemption.async_write_in_flight PROCESSORS 1 TIMEOUT 300
                 COMMAND ${FAULTS_SCRIPTS}/preemption_test.sh $<TARGET_FILE:triax> ${FAULTS_CONFIG}
                         ${FAULTS_DIR}/preemption_async async_write_in_flight)
triax_fault_test(error_propagation PROCESSORS 1 TIMEOUT 300
                 COMMAND ${FAULTS_SCRIPTS}/error_propagation_test.sh $<TARGET_FILE:triax> ${FAULTS_CONFIG}
                         ${FAULTS_DIR}/error_propagation)
triax_fault_test(disk_full PROCESSORS 1 TIMEOUT 300
                 COMMAND ${FAULTS_SCRIPTS}/disk_full_test.sh $<TARGET_FILE:triax> ${FAULTS_CONFIG} ${FAULTS_DIR}/disk_full)
triax_fault_test(disk_full_async PROCESSORS 1 TIMEOUT 300
                 COMMAND ${FAULTS_SCRIPTS}/disk_full_test.sh $<TARGET_FILE:triax> ${FAULTS_CONFIG}
                         ${FAULTS_DIR}/disk_full_async --set checkpoints.async_save=true)
# 20 SIGKILL trials in all: 5 per point, topologies, victims and steps drawn from each seed.
set(seed 1)
foreach(point forward backward optimizer_step mid_rank_file)
  math(EXPR seed "${seed} + 1")
  triax_fault_test(rank_death.${point} PROCESSORS 1 TIMEOUT 600
                   COMMAND ${FAULTS_SCRIPTS}/rank_death_test.sh $<TARGET_FILE:triax> ${FAULTS_CONFIG}
                           ${FAULTS_DIR}/rank_death_${point} ${seed} 5 ${point})
endforeach()
# The soak's drill in the suite: 300 steps at dp=2 x pp=2, a checkpoint every 25 steps, a rank
# killed every ~100 steps (about 2.5 minutes). The full soak (2,000 steps, every 50, every ~300)
# takes about 25 minutes on two cores, over the suite's budget: docs/reliability.md gives its
# command and its last result.
triax_fault_test(soak PROCESSORS 4 TIMEOUT 1200 LABELS slow
                 COMMAND ${FAULTS_SCRIPTS}/soak_test.sh $<TARGET_FILE:triax> ${FAULTS_CONFIG} ${FAULTS_DIR}/soak
                         300 25 100 15)
