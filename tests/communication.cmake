# The mpi backend under mpirun: every operation over every group kind at 2 and 4 ranks.
add_executable(communicator_test ${CMAKE_CURRENT_LIST_DIR}/communicator_test.cpp)
target_link_libraries(communicator_test PRIVATE triax_multi_rank_main)
triax_use_pch(communicator_test)
triax_add_multi_rank_test(NAME communicator_2_ranks RANKS 2 COMMAND $<TARGET_FILE:communicator_test> TIMEOUT 120)
triax_add_multi_rank_test(NAME communicator_4_ranks RANKS 4 COMMAND $<TARGET_FILE:communicator_test> TIMEOUT 120)
