// optimizer: which optimizer plugin (optimizer_factory.name + zero_stage), weight decay and its
// exclusions, clipping, and the learning-rate schedule with nanotron's derived defaults. The
// whole section is handed to the optimizer plugin, which reads optimizer_factory strictly.
#include <algorithm>
#include <cctype>
#include <regex>

#include "config_sections.hpp"

namespace triax::config {
namespace {

// ZeRO stages with an optimizer plugin ("zero<k>_<name>"): 1 shards the optimizer state, 3 also
// the parameters (and with them the gradients); stage 2 has no plugin of its own.
constexpr int64_t kMaxZeroStage = 3;
constexpr int64_t kUnimplementedZeroStage = 2;

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

LrSchedulerConfig read_lr_scheduler(ConfigReader& optimizer, const TokensConfig& tokens) {
  ConfigReader r = optimizer.section("learning_rate_scheduler");
  LrSchedulerConfig s;
  s.learning_rate = r.required<double>("learning_rate");
  if (s.learning_rate <= 0) r.fail("learning_rate", "must be > 0, got " + number(s.learning_rate));
  s.lr_warmup_steps = int_or(r, "lr_warmup_steps", 0, 0);
  s.lr_warmup_style = r.choice("lr_warmup_style", {"linear", "constant"}, s.lr_warmup_style);
  s.lr_decay_style = r.choice("lr_decay_style", {"linear", "cosine", "1-sqrt"}, s.lr_decay_style);

  // nanotron's defaults: Config.__post_init__ sets lr_decay_steps = train_steps - lr_warmup_steps;
  // lr_scheduler_builder starts the decay at lr_warmup_steps; LRSchedulerArgs sets
  // min_decay_lr = learning_rate.
  std::optional<int64_t> decay_steps = optional_int(r, "lr_decay_steps", 0);
  // A run shorter than its warm-up (a quick check with --set tokens.train_steps=3) has no decay.
  s.lr_decay_steps = decay_steps ? *decay_steps : std::max<int64_t>(0, tokens.train_steps - s.lr_warmup_steps);
  r.resolved()["lr_decay_steps"] = s.lr_decay_steps;
  std::optional<int64_t> decay_start = optional_int(r, "lr_decay_starting_step", 0);
  s.lr_decay_starting_step = decay_start ? *decay_start : s.lr_warmup_steps;
  r.resolved()["lr_decay_starting_step"] = s.lr_decay_starting_step;
  std::optional<double> min_lr = r.optional<double>("min_decay_lr");
  s.min_decay_lr = min_lr ? *min_lr : s.learning_rate;
  if (s.min_decay_lr < 0) r.fail("min_decay_lr", "must be >= 0, got " + number(s.min_decay_lr));
  r.resolved()["min_decay_lr"] = s.min_decay_lr;
  r.finish();

  if (s.min_decay_lr > s.learning_rate)
    r.fail("min_decay_lr", "is " + number(s.min_decay_lr) + ", more than learning_rate (" + number(s.learning_rate) +
                               "); the decay would raise the learning rate");
  return s;
}

// Only the factory's name is read here, to choose the plugin; the plugin reads the rest strictly.
std::string read_factory_name(ConfigReader& r, const std::string& fallback) {
  // (yaml-cpp: assigning a Node to a Node handle rewrites the node it refers to, so a handle
  // into the document is never assigned; copies are made with Clone.)
  const YAML::Node given = r.raw("optimizer_factory");
  const bool factory_given = given.IsDefined() && !given.IsNull();
  if (factory_given && !given.IsMap())
    r.fail("optimizer_factory", "expected a mapping (name: adamW and the optimizer's hyper-parameters)");
  ConfigReader factory_reader(factory_given ? given : YAML::Node(YAML::NodeType::Map), r.key_path("optimizer_factory"),
                              r.origin());
  const std::string name = factory_reader.get<std::string>("name", fallback);
  if (name.empty()) factory_reader.fail("name", "expected the optimizer's name (a string such as adamW)");

  // The document's node when given (it keeps the file's lines for the optimizer plugin's
  // messages); the name is added where it was left out.
  YAML::Node factory = factory_given ? given : YAML::Node(YAML::NodeType::Map);
  if (!factory["name"]) factory["name"] = name;
  r.resolved()["optimizer_factory"] = factory;
  return name;
}

}  // namespace

OptimizerConfig read_optimizer(ConfigReader& root, const TokensConfig& tokens) {
  ConfigReader r = root.section("optimizer");
  // Older nanotron configs kept AdamW's hyper-parameters directly under optimizer.
  for (const char* old : {"adam_eps", "adam_beta1", "adam_beta2", "torch_adam_is_fused"})
    if (r.contains(old))
      r.fail(old, "unknown key; current nanotron configs put it under optimizer.optimizer_factory (with name: adamW)");

  OptimizerConfig o;
  o.factory_name = read_factory_name(r, o.factory_name);
  o.zero_stage = int_or(r, "zero_stage", o.zero_stage, 0);
  if (o.zero_stage > kMaxZeroStage || o.zero_stage == kUnimplementedZeroStage)
    r.fail("zero_stage", "triax implements ZeRO stages 0, 1 and 3, got " + std::to_string(o.zero_stage));
  o.plugin = lowercase(o.factory_name);
  if (o.zero_stage > 0) o.plugin = "zero" + std::to_string(o.zero_stage) + "_" + o.plugin;

  o.weight_decay = r.get<double>("weight_decay", o.weight_decay);
  if (o.weight_decay < 0) r.fail("weight_decay", "must be >= 0, got " + number(o.weight_decay));
  o.weight_decay_exclude_named_params =
      r.get<std::vector<std::string>>("weight_decay_exclude_named_params", o.weight_decay_exclude_named_params);
  for (size_t i = 0; i < o.weight_decay_exclude_named_params.size(); ++i) {
    try {
      std::regex compiled(o.weight_decay_exclude_named_params[i]);
    } catch (const std::regex_error& e) {
      r.fail("weight_decay_exclude_named_params." + std::to_string(i),
             "'" + o.weight_decay_exclude_named_params[i] + "' is not a valid regular expression (" + e.what() + ")");
    }
  }

  o.clip_grad = r.optional<double>("clip_grad");
  if (o.clip_grad && *o.clip_grad <= 0)
    r.fail("clip_grad", "must be > 0 (or null for no clipping), got " + number(*o.clip_grad));
  o.accumulate_grad_in_fp32 = r.get<bool>("accumulate_grad_in_fp32", o.accumulate_grad_in_fp32);
  o.learning_rate_scheduler = read_lr_scheduler(r, tokens);
  r.finish();
  o.section = r.resolved();  // not a copy: optimizer_factory keeps its lines (see above)
  return o;
}

}  // namespace triax::config
