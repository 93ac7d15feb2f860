# The checkpoint store: HDF5 files, folder rules, save/resume in one process and bad checkpoints
# (checkpoint_test.cpp, checkpoint_staging_test.cpp, in core_test: tests/core_test.cmake); resharding
# across topologies and crash safety on real processes are in checkpoint_topology.cmake.
target_sources(core_test PRIVATE checkpoint_test.cpp checkpoint_staging_test.cpp)
# checkpoints.async_save, and its staging's private headers (checkpoint_staging_test.cpp).
target_link_libraries(core_test PRIVATE triax_checkpoint_async)
target_include_directories(core_test PRIVATE ${PROJECT_SOURCE_DIR}/checkpoint_async/src)
add_dependencies(core_test triax_llama triax_afab triax_adamw triax_zero1_adamw)
triax_add_area_suites(core_test SUITES CheckpointErrors.* CheckpointFolder.* CheckpointInit.* CheckpointResume.* Hdf5File.*
                      PROPERTIES TIMEOUT 300)
# Which pieces a background save stages in device memory, and its host copies (no training run).
triax_add_area_suites(core_test SUITES DeviceStaging.* HostSnapshot.* PROPERTIES TIMEOUT 60)
# A background save staged in spare device memory on one GPU (label gpu; skipped without a GPU).
triax_add_area_suites(core_test SUITES CheckpointCuda.* PROPERTIES LABELS gpu TIMEOUT 300)
