#include "muon_settings.hpp"

#include <regex>
#include <sstream>

#include "triax/error.hpp"

namespace triax::plugins {
namespace {

void check_patterns(const ConfigReader& factory, const char* key, const std::vector<std::string>& patterns) {
  for (size_t i = 0; i < patterns.size(); ++i) {
    try {
      std::regex compiled(patterns[i]);
    } catch (const std::regex_error& e) {
      factory.fail(std::string(key) + "." + std::to_string(i),
                   "'" + patterns[i] + "' is not a valid regular expression (" + e.what() + ")");
    }
  }
}

std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

const std::vector<std::string>& default_adamw_named_params() {
  static const std::vector<std::string> patterns = {".*embed", ".*lm_head", ".*\\.gate\\.weight", ".*bias",
                                                    ".*conv1d", ".*A_log"};
  return patterns;
}

MuonSettings MuonSettings::read(const YAML::Node& optimizer_section) {
  ConfigReader optimizer(optimizer_section, "optimizer");
  MuonSettings s;
  s.factory_.emplace(optimizer.section("optimizer_factory"));
  ConfigReader& factory = *s.factory_;
  factory.required<std::string>("name");
  s.adamw = AdamWSettings::read_keys(factory);
  s.update.momentum = factory.get<double>("momentum", s.update.momentum);
  s.update.nesterov = factory.get<bool>("nesterov", s.update.nesterov);
  s.update.ns_steps = factory.get<int64_t>("ns_steps", s.update.ns_steps);
  s.update.coefficients = *find_newton_schulz_coefficients(factory.choice("ns_coefficients", {"quintic", "cubic"}, "quintic"));
  s.update.update_rms = factory.get<double>("update_rms", s.update.update_rms);
  s.qk_clip_threshold = factory.optional<double>("qk_clip_threshold");
  if (!s.qk_clip_threshold) factory.resolved()["qk_clip_threshold"] = YAML::Node(YAML::NodeType::Null);
  s.muon_named_params = factory.get<std::vector<std::string>>("muon_named_params", {});
  s.adamw_named_params = factory.get<std::vector<std::string>>("adamw_named_params", default_adamw_named_params());
  s.max_matrix_elements = factory.get<int64_t>("max_muon_matrix_elements", s.max_matrix_elements);
  factory.finish();

  s.adamw.check(factory);
  if (s.update.momentum < 0 || s.update.momentum >= 1)
    factory.fail("momentum", "expected a value in [0, 1), got " + number_text(s.update.momentum));
  if (s.update.ns_steps < 1 || s.update.ns_steps > 100) factory.fail("ns_steps", "expected 1 to 100 steps, got " + std::to_string(s.update.ns_steps));
  if (!(s.update.update_rms > 0)) factory.fail("update_rms", "expected a positive number, got " + number_text(s.update.update_rms));
  if (s.qk_clip_threshold && !(*s.qk_clip_threshold > 0))
    factory.fail("qk_clip_threshold", "expected a positive number (or null: no clipping), got " +
                                          number_text(*s.qk_clip_threshold));
  if (s.max_matrix_elements < 1)
    factory.fail("max_muon_matrix_elements", "expected at least 1, got " + std::to_string(s.max_matrix_elements));
  check_patterns(factory, "muon_named_params", s.muon_named_params);
  check_patterns(factory, "adamw_named_params", s.adamw_named_params);
  return s;
}

std::string MuonSettings::resolved_yaml() const { return factory_ ? to_yaml_text(factory_->resolved()) : ""; }

}  // namespace triax::plugins
