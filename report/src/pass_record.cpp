#include "triax/report/pass_record.hpp"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "triax/device_wait.hpp"
#include "triax/error.hpp"
#include "triax/report/pass_record_format.hpp"

namespace triax {
namespace {

// Microseconds are all the record keeps.
double rounded(double milliseconds) { return std::round(milliseconds * 1000.0) / 1000.0; }

}  // namespace

void PassRecord::open(const std::string& path, PassRecordPlace place) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  out_.open(path, std::ios::app);
  if (!out_)
    throw ConfigError("parallelism.pp_pass_record: cannot write the record '" + path + "'" +
                      (ec ? ": " + ec.message() : std::string()));
  path_ = path;
  place_ = std::move(place);
}

double PassRecord::milliseconds_since_start() const {
  // A part's or a pass's time includes its work on the device.
  wait_for_device(place_.device);
  return std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
}

void PassRecord::begin_step(int64_t step) {
  if (!on()) return;
  step_ = step;
  parts_.clear();
  timeline_.clear();
  last_mark_ms_ = 0.0;
  start_ = Clock::now();
}

void PassRecord::part_done(const char* part) {
  if (!on()) return;
  const double now = milliseconds_since_start();
  parts_.emplace_back(part, now - last_mark_ms_);
  last_mark_ms_ = now;
}

void PassRecord::pass_timed(triax_pass_kind kind, int chunk, int micro_batch, double seconds) {
  // A kind this host does not know (an engine of a later ABI) is left out.
  if (!on() || static_cast<size_t>(kind) >= kPassKindNames.size()) return;
  const double end = std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
  timeline_.push_back({kind, chunk, micro_batch, end - seconds * 1000.0, seconds * 1000.0});
}

void PassRecord::end_step() {
  if (!on()) return;
  nlohmann::ordered_json line{{"step", step_},
                              {"rank", place_.rank},
                              {"pp_rank", place_.pp_rank},
                              {"pp_size", place_.pp_size},
                              {"chunks", place_.chunks},
                              {"micro_batches", place_.micro_batches},
                              {"engine", place_.engine},
                              {"step_ms", rounded(milliseconds_since_start())}};
  nlohmann::ordered_json parts = nlohmann::ordered_json::object();
  for (const auto& [name, ms] : parts_) parts[name] = rounded(ms);
  line["parts_ms"] = std::move(parts);
  nlohmann::ordered_json timeline = nlohmann::ordered_json::array();
  for (const Timed& t : timeline_)
    timeline.push_back({{"pass", kPassKindNames.at(static_cast<size_t>(t.kind))},
                        {"chunk", t.chunk},
                        {"micro_batch", t.micro_batch},
                        {"start_ms", rounded(t.start_ms)},
                        {"ms", rounded(t.ms)}});
  line["timeline"] = std::move(timeline);
  out_ << line.dump() << '\n';
  out_.flush();
  if (!out_) throw Error("parallelism.pp_pass_record: writing the record '" + path_ + "' failed");
}

}  // namespace triax
