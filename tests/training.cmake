# In core_test (tests/core_test.cmake). Its *Cuda suites (the fused AdamW kernel against LibTorch's
# fused AdamW, ...) carry the label gpu and skip without a GPU.
target_sources(core_test PRIVATE training_test.cpp gradient_handoff_test.cpp step_read_back_test.cpp step_times_test.cpp
               model_memory_test.cpp adamw_fp8_amax_test.cpp)
add_dependencies(core_test triax_llama triax_afab triax_adamw triax_zero1_adamw)
target_include_directories(core_test PRIVATE ${PROJECT_SOURCE_DIR}/sdk/src)  # recorded_amax.hpp (adamw_fp8_amax_test)
triax_add_area_suites(core_test SUITES AdamWPlugin.* DataParallelGradients.* GradientAccumulator.* LearningRateSchedule.*
  SyntheticTokenStream.* Training.* WeightDecayPolicy.* Zero1AdamWPlugin.* ZeroPartition.* GlobalNorm.* GradientHandoff.*
  StepReadBack.* DeviceMark.* ModelMemory.* PROPERTIES TIMEOUT 300)
