// main() of the multi-rank GoogleTest executables: MPI around the test run, the full test log
// from rank 0 only, failures from every rank (prefixed with the rank), and one cache of
// communicators per mesh shape.
#include <mpi.h>

#include <cstdio>
#include <map>
#include <tuple>

#include "multi_rank_environment.hpp"

namespace triax::testing {
namespace {

using ShapeKey = std::tuple<int, int, int, int, int>;

std::map<ShapeKey, std::unique_ptr<MpiCommunicator>>& communicators() {
  static std::map<ShapeKey, std::unique_ptr<MpiCommunicator>> cache;
  return cache;
}

// What the other ranks print: only their failed assertions, so a failure on rank 3 is not lost.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

MpiCommunicator& communicator(const MeshShape& shape) {
  const ShapeKey key{shape.dp, shape.pp, shape.tp, shape.ep, shape.cp};
  auto& cache = communicators();
  auto found = cache.find(key);
  if (found == cache.end()) {
    CommunicatorOptions options;
    options.timeout_seconds = 30;
    found = cache.emplace(key, std::make_unique<MpiCommunicator>(shape, options)).first;
  }
  return *found->second;
}

}  // namespace triax::testing

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, triax::MpiCommunicator::required_thread_level(), &provided);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = triax::testing::world_rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new triax::testing::RankFailurePrinter(rank));
  }
  const int result = RUN_ALL_TESTS();
  triax::testing::communicators().clear();  // collective clean-up, in the same order on every rank
  MPI_Finalize();
  return result;
}
