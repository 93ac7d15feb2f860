# Zero-bubble pipeline schedules (docs/pipeline-schedules.md): the schedules as data and the
# schedule simulator (plain C++), the backward split into B and W in the SDK's layers against the
# whole backward, the engines zb_h1 and zb_v over real ranks (PipelineStage, a V's hand-overs in
# memory, a W never run), their refusals before step 1, the parity runs against the single rank
# (parity.cmake, moe.cmake) and `triax inspect schedule`. Label: zero_bubble.
add_executable(zero_bubble_schedule_test ${CMAKE_CURRENT_LIST_DIR}/zero_bubble_schedule_test.cpp)
target_link_libraries(zero_bubble_schedule_test PRIVATE triax_pipeline_schedules GTest::gtest_main)
gtest_discover_tests(zero_bubble_schedule_test PROPERTIES LABELS zero_bubble)
