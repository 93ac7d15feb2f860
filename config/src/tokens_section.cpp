// tokens (sequence length, steps, batch sizes) and tokenizer (which tokenizer made the data).
#include <unistd.h>

#include "config_sections.hpp"

namespace triax::config {
namespace {

// 16 Mi: above any sequence length or batch dimension in use.
constexpr int64_t kMaxBatchDimension = int64_t{1} << 24;

// A data-parallel rank holds its step's token ids (int64, one more per sample for the labels)
// twice, the next step's being prefetched: more than the machine's memory cannot start.
void check_step_tokens_fit(ConfigReader& r, const TokensConfig& t) {
  const double bytes = 2.0 * 8.0 * static_cast<double>(t.micro_batch_size) *
                       static_cast<double>(t.batch_accumulation_per_replica) *
                       (static_cast<double>(t.sequence_length) + 1.0);
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (memory > 0 && bytes > memory)
    r.fail("micro_batch_size", "micro_batch_size x batch_accumulation_per_replica x (sequence_length + 1) token ids (" +
                                   number(bytes / 2.0 / 8.0) + ", twice over for prefetching: " +
                                   number(bytes / double(1 << 30)) + " GiB) do not fit in this machine's " +
                                   number(memory / double(1 << 30)) + " GiB of memory");
}

}  // namespace

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
  t.sequence_length = required_int(r, "sequence_length", 1, kMaxBatchDimension);
  t.train_steps = required_int(r, "train_steps", 1);
  t.micro_batch_size = required_int(r, "micro_batch_size", 1, kMaxBatchDimension);
  t.batch_accumulation_per_replica = required_int(r, "batch_accumulation_per_replica", 1, kMaxBatchDimension);
  t.val_check_interval = int_or(r, "val_check_interval", t.val_check_interval, -1);
  t.limit_val_batches = int_or(r, "limit_val_batches", t.limit_val_batches, 0);
  t.limit_test_batches = int_or(r, "limit_test_batches", t.limit_test_batches, 0);
  r.finish();
  if (t.val_check_interval > 0 && t.limit_val_batches < 1)
    r.fail("limit_val_batches", "is 0, but val_check_interval is " + std::to_string(t.val_check_interval) +
                                    ": give the validation micro-batches each data-parallel replica evaluates "
                                    "(at least 1), or set val_check_interval to -1 for no validation");
  check_step_tokens_fit(r, t);

  if (parallelism.tp_mode == "REDUCE_SCATTER" && t.sequence_length % parallelism.tp != 0)
    r.fail("sequence_length", std::to_string(t.sequence_length) + " is not divisible by parallelism.tp (" +
                                  std::to_string(parallelism.tp) +
                                  "), which tp_mode REDUCE_SCATTER needs (sequence parallelism splits the sequence)");
  return t;
}

}  // namespace triax::config
