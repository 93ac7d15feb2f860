// tokens (sequence length, steps, batch sizes) and tokenizer (which tokenizer made the data).
#include "config/config_sections.hpp"

namespace triax::config {

TokenizerConfig read_tokenizer(ConfigReader& root) {
  ConfigReader r = section_or_empty(root, "tokenizer");
  TokenizerConfig t;
  t.tokenizer_name_or_path = r.optional<std::string>("tokenizer_name_or_path");
  t.tokenizer_revision = r.optional<std::string>("tokenizer_revision");
  t.tokenizer_max_length = optional_int(r, "tokenizer_max_length", 1);
  r.finish();
  return t;
}

TokensConfig read_tokens(ConfigReader& root, const ParallelismConfig& parallelism) {
  ConfigReader r = root.section("tokens");
  TokensConfig t;
  t.sequence_length = required_int(r, "sequence_length", 1);
  t.train_steps = required_int(r, "train_steps", 1);
  t.micro_batch_size = required_int(r, "micro_batch_size", 1);
  t.batch_accumulation_per_replica = required_int(r, "batch_accumulation_per_replica", 1);
  t.val_check_interval = int_or(r, "val_check_interval", t.val_check_interval, -1);
  t.limit_val_batches = int_or(r, "limit_val_batches", t.limit_val_batches, 0);
  t.limit_test_batches = int_or(r, "limit_test_batches", t.limit_test_batches, 0);
  r.finish();

  if (parallelism.tp_mode == "REDUCE_SCATTER" && t.sequence_length % parallelism.tp != 0)
    r.fail("sequence_length", std::to_string(t.sequence_length) + " is not divisible by parallelism.tp (" +
                                  std::to_string(parallelism.tp) +
                                  "), which tp_mode REDUCE_SCATTER needs (sequence parallelism splits the sequence)");
  return t;
}

}  // namespace triax::config
