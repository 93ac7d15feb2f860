#include "triax/core/checkpoint/save_strategy.hpp"
#include "triax/report/log.hpp"

namespace triax::checkpoint {
namespace {

// This rank's file written from the live tensors on the training thread, then the commit.
class SynchronousSave : public SaveStrategy {
 public:
  explicit SynchronousSave(SaveStrategySetup setup) : setup_(std::move(setup)) {}

  void save(SaveRequest request) override {
    const int64_t step = request.metadata.step;
    const SaveResult result = setup_.commit(step, [&] {
      return request.writer.save(request.metadata, setup_.live_contents(), request.resolved_config);
    });
    const double gigabytes = static_cast<double>(result.bytes_written) / 1e9;
    log::info("checkpoint: step " + std::to_string(step) + " saved to " + result.folder.string() + " in " +
              std::to_string(result.seconds) + " s (" + std::to_string(gigabytes) + " GB from this rank, " +
              std::to_string(result.seconds > 0 ? gigabytes / result.seconds : 0.0) + " GB/s)");
  }

 private:
  SaveStrategySetup setup_;
};

}  // namespace

std::unique_ptr<SaveStrategy> synchronous_save(SaveStrategySetup setup) {
  return std::make_unique<SynchronousSave>(std::move(setup));
}

}  // namespace triax::checkpoint
