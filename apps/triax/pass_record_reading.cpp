#include "pass_record_reading.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "triax/report/pass_record_format.hpp"
#include "triax/error.hpp"

namespace triax::cli {
namespace {

using Json = nlohmann::json;
using plugins::PassKind;

double median_of(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The index of a "pass" name in kPassKindNames (a triax_pass_kind).
int kind_index(const std::string& name, const std::string& where) {
  for (size_t k = 0; k < kPassKindNames.size(); ++k)
    if (name == kPassKindNames[k]) return static_cast<int>(k);
  throw ConfigError(where + ": unknown pass '" + name + "'");
}

bool is_pass(int kind) { return kind <= TRIAX_PASS_BACKWARD_WEIGHT; }
plugins::ScheduleStep::Kind step_kind_of(int kind) {
  using Kind = plugins::ScheduleStep::Kind;
  static const Kind kinds[] = {Kind::Forward,      Kind::Backward,   Kind::BackwardInput,   Kind::BackwardWeight,
                               Kind::ReceiveInput, Kind::SendOutput, Kind::ReceiveGradient, Kind::SendGradient};
  return kinds[kind];
}
bool is_receive(int kind) { return kind == TRIAX_PASS_RECEIVE_INPUT || kind == TRIAX_PASS_RECEIVE_GRADIENT; }
PassKind pass_kind_of(int kind) {
  static const PassKind kinds[] = {PassKind::Forward, PassKind::Backward, PassKind::BackwardInput,
                                   PassKind::BackwardWeight};
  return kinds[kind];
}

std::vector<Json> read_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<Json> lines;
  for (std::string text; std::getline(in, text);) {
    if (text.empty()) continue;
    try {
      lines.push_back(Json::parse(text));
    } catch (const Json::exception& e) {
      throw ConfigError(path.string() + ": line " + std::to_string(lines.size() + 1) + " is not JSON: " + e.what());
    }
  }
  return lines;
}

// The sum over one step's sends of the time from the end of the pass that made the tensor to the
// start of its send.
double held_ms(const Json& timeline) {
  std::map<std::tuple<int, int, int>, double> made;  // (send kind, chunk, micro-batch): the pass's end
  double held = 0.0;
  for (const Json& t : timeline) {
    const std::string pass = t.at("pass").get<std::string>();
    const std::tuple<int, int> where{t.at("chunk").get<int>(), t.at("micro_batch").get<int>()};
    const double start = t.at("start_ms").get<double>(), end = start + t.at("ms").get<double>();
    auto key = [&](int kind) { return std::tuple_cat(std::tuple<int>{kind}, where); };
    if (pass == "forward") made[key(TRIAX_PASS_SEND_OUTPUT)] = end;
    if (pass == "backward" || pass == "backward_input") made[key(TRIAX_PASS_SEND_GRADIENT)] = end;
    for (const int send : {TRIAX_PASS_SEND_OUTPUT, TRIAX_PASS_SEND_GRADIENT})
      if (pass == kPassKindNames[send] && made.count(key(send))) held += start - made[key(send)];
  }
  return held;
}

// Every micro-batch through every chunk once forward and once backward (whole, or B and W).
void check_passes(const std::vector<plugins::Pass>& passes, const RecordedRun& run, const std::string& where) {
  std::map<std::tuple<int, int, int>, int> count;  // (kind, chunk, micro-batch)
  for (const plugins::Pass& p : passes) ++count[{static_cast<int>(p.kind), p.chunk, p.micro_batch}];
  const size_t distinct = count.size();  // the checks below add zeros
  for (int c = 0; c < run.chunks; ++c)
    for (int i = 0; i < run.micro_batches; ++i) {
      auto n = [&](PassKind kind) { return count[{static_cast<int>(kind), c, i}]; };
      const bool whole = n(PassKind::Backward) == 1 && n(PassKind::BackwardInput) + n(PassKind::BackwardWeight) == 0;
      const bool split =
          n(PassKind::Backward) == 0 && n(PassKind::BackwardInput) == 1 && n(PassKind::BackwardWeight) == 1;
      if (n(PassKind::Forward) != 1 || !(whole || split))
        throw ConfigError(where + ": micro-batch " + std::to_string(i) + " of chunk " + std::to_string(c) +
                          " does not go once forward and once backward (or once through B and W)");
    }
  if (passes.size() != distinct) throw ConfigError(where + ": a pass outside the run's chunks and micro-batches");
}

// One rank's kept lines: its order, mean pass times per chunk and median step parts.
RecordedRank summarize_rank(const std::vector<Json>& lines, const RecordedRun& run, const std::string& file) {
  RecordedRank rank;
  rank.world_rank = lines.front().at("rank").get<int>();
  std::vector<std::array<double, 4>> sums(run.chunks), counts(run.chunks);  // per chunk, by pass kind
  std::vector<double> receives, sends, engine, outside, step, held;
  for (const Json& line : lines) {
    const std::string where = file + ", step " + std::to_string(line.at("step").get<int64_t>());
    std::vector<plugins::Pass> passes;
    std::vector<plugins::ScheduleStep> steps;
    double received = 0.0, sent = 0.0;
    for (const Json& t : line.at("timeline")) {
      const int kind = kind_index(t.at("pass").get<std::string>(), where);
      const int chunk = t.at("chunk").get<int>();
      const double ms = t.at("ms").get<double>();
      steps.push_back({step_kind_of(kind), chunk, t.at("micro_batch").get<int>(), -1});
      if (!is_pass(kind)) {
        (is_receive(kind) ? received : sent) += ms;
        continue;
      }
      passes.push_back({pass_kind_of(kind), chunk, t.at("micro_batch").get<int>()});
      if (chunk < 0 || chunk >= run.chunks) throw ConfigError(where + ": chunk " + std::to_string(chunk));
      sums[chunk][kind] += ms;
      counts[chunk][kind] += 1;
    }
    check_passes(passes, run, where);
    if (rank.order.empty()) {
      rank.order = passes;
      rank.steps = steps;
    }
    const double engine_ms = line.at("parts_ms").value("engine", 0.0), step_ms = line.at("step_ms").get<double>();
    receives.push_back(received);
    held.push_back(held_ms(line.at("timeline")));
    sends.push_back(sent);
    engine.push_back(engine_ms);
    outside.push_back(step_ms - engine_ms);
    step.push_back(step_ms);
  }
  for (int c = 0; c < run.chunks; ++c) {
    auto mean = [&](int kind) { return counts[c][kind] > 0 ? sums[c][kind] / counts[c][kind] : 0.0; };
    plugins::ChunkPassTimes times{mean(TRIAX_PASS_FORWARD), mean(TRIAX_PASS_BACKWARD_INPUT),
                                  mean(TRIAX_PASS_BACKWARD_WEIGHT), mean(TRIAX_PASS_BACKWARD)};
    if (counts[c][TRIAX_PASS_BACKWARD] == 0) times.backward = times.backward_input + times.backward_weight;
    rank.chunk_times.push_back(times);
  }
  rank.receives = median_of(receives);
  rank.sends = median_of(sends);
  rank.held = median_of(held);
  rank.engine = median_of(engine);
  rank.outside = median_of(outside);
  rank.step = median_of(step);
  return rank;
}

}  // namespace

RecordedRun read_pass_record(const std::string& run_folder, int skip_steps) {
  const std::filesystem::path folder = std::filesystem::path(pass_record_path(run_folder, 0)).parent_path();
  if (!std::filesystem::is_directory(folder))
    throw ConfigError(folder.string() + ": no record of pipeline passes (train with parallelism.pp_pass_record: true)");
  std::map<int, std::pair<std::string, std::vector<Json>>> by_pp_rank;  // the lowest world rank's kept lines
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    std::vector<Json> lines = read_lines(entry.path());
    if (static_cast<int>(lines.size()) <= skip_steps)
      throw ConfigError(entry.path().string() + ": " + std::to_string(lines.size()) + " steps, none left after " +
                        std::to_string(skip_steps) + " skipped");
    lines.erase(lines.begin(), lines.begin() + skip_steps);
    auto& kept = by_pp_rank[lines.front().at("pp_rank").get<int>()];
    if (kept.second.empty() || lines.front().at("rank").get<int>() < kept.second.front().at("rank").get<int>())
      kept = {entry.path().string(), std::move(lines)};
  }
  if (by_pp_rank.empty()) throw ConfigError(folder.string() + ": empty");
  RecordedRun run;
  const Json& first = by_pp_rank.begin()->second.second.front();
  run.engine = first.at("engine").get<std::string>();
  run.pp_size = first.at("pp_size").get<int>();
  run.chunks = first.at("chunks").get<int>();
  run.micro_batches = first.at("micro_batches").get<int>();
  if (static_cast<int>(by_pp_rank.size()) != run.pp_size || by_pp_rank.rbegin()->first != run.pp_size - 1)
    throw ConfigError(folder.string() + ": records of " + std::to_string(by_pp_rank.size()) +
                      " pipeline ranks, pp is " + std::to_string(run.pp_size));
  std::map<int64_t, std::pair<double, double>> slowest;  // step: the most engine and step time of any rank
  for (const auto& [pp_rank, kept] : by_pp_rank) {
    run.ranks.push_back(summarize_rank(kept.second, run, kept.first));
    for (const Json& line : kept.second) {
      auto& [engine, step] = slowest[line.at("step").get<int64_t>()];
      engine = std::max(engine, line.at("parts_ms").value("engine", 0.0));
      step = std::max(step, line.at("step_ms").get<double>());
    }
  }
  std::vector<double> engines, steps;
  for (const auto& [step, times] : slowest) {
    run.steps.push_back(step);
    engines.push_back(times.first);
    steps.push_back(times.second);
  }
  run.slowest_engine = median_of(engines);
  run.slowest_step = median_of(steps);
  return run;
}

}  // namespace triax::cli
