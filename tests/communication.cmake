# The mpi backend under mpirun: every operation over every group kind at 2 and 4 ranks.
target_sources(multi_rank_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/communicator_test.cpp)
triax_add_multi_rank_suites(NAME communicator_2_ranks RANKS 2 SUITES MpiCommunicator TIMEOUT 120)
# Four ranks that mostly wait for each other (about 20% of a core's time each): one core reserved.
triax_add_multi_rank_suites(NAME communicator_4_ranks RANKS 4 PROCESSORS 1 SUITES MpiCommunicator TIMEOUT 120)

# The no-hang guarantee: a stopped or lagging peer is named within the timeout.
target_sources(multi_rank_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/communicator_timeout_test.cpp)
triax_add_multi_rank_suites(NAME communicator_timeout_2_ranks RANKS 2 PROCESSORS 1 SUITES MpiCommunicatorTimeout
                            TIMEOUT 60)

# `triax launch`, rendezvous errors, a rank killed mid-training, `triax inspect mesh`.
add_test(NAME launch COMMAND ${CMAKE_CURRENT_LIST_DIR}/launch_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR})
set_tests_properties(launch PROPERTIES TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=1")

# Rendezvous from launcher variables: no process started.
add_executable(launch_environment_test ${CMAKE_CURRENT_LIST_DIR}/launch_environment_test.cpp)
target_link_libraries(launch_environment_test PRIVATE triax_comm GTest::gtest_main)
triax_discover_test_suites(launch_environment_test)

# The nccl backend's asynchronous collectives on one GPU (label gpu; skipped without a GPU). A CPU
# build leaves it out: there every case would only skip.
if(TRIAX_CUDA)
  add_executable(nccl_communicator_test ${CMAKE_CURRENT_LIST_DIR}/nccl_communicator_test.cpp)
  target_link_libraries(nccl_communicator_test PRIVATE triax_comm GTest::gtest_main)
  triax_use_pch(nccl_communicator_test)
  triax_discover_test_suites(nccl_communicator_test PROPERTIES LABELS gpu)
endif()

# The progress thread of the mpi backend, where Open MPI's shared memory has no single copy (as in
# containers): a large send completes while its sender computes.
target_sources(multi_rank_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/mpi_progress_test.cpp)
triax_add_multi_rank_suites(NAME mpi_progress_2_ranks RANKS 2 SUITES MpiProgressThread TIMEOUT 60)
set_property(TEST mpi_progress_2_ranks APPEND PROPERTY ENVIRONMENT OMPI_MCA_btl_vader_single_copy_mechanism=none)
