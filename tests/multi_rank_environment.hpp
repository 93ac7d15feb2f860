// Helpers for GoogleTest executables run under mpirun (link triax_multi_rank_main, register with
// triax_add_multi_rank_test). Every rank runs every test: collectives must be called by all ranks
// in the same order, so a test that does not apply to the world size skips on every rank alike.
#pragma once

#include <gtest/gtest.h>

#include "mpi_communicator.hpp"

namespace triax::testing {

int world_rank();
int world_size();

// The communicator of `shape`, built collectively on first request and kept until the end of
// the run (every rank must request the same shapes in the same order). Its timeout is short
// (30 s) so that a broken test fails instead of waiting for ctest's.
MpiCommunicator& communicator(const MeshShape& shape);

}  // namespace triax::testing

// Skips the test on every rank unless the world has exactly `n` processes.
#define TRIAX_REQUIRE_WORLD_SIZE(n)                                                         \
  do {                                                                                      \
    if (::triax::testing::world_size() != (n)) GTEST_SKIP() << "needs " << (n) << " ranks"; \
  } while (0)
