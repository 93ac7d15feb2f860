// The reference's training sections: optimizer and its schedule, data stages and token folders,
// logging, profiler, fp8, plugins, and the nanotron sections accepted only as null.
// Notes are markdown; a line break inside one is a space in the table.
#include "reference_tables.hpp"

namespace triax::config_reference {
namespace {

const ValueType kLogLevels = choice({"debug", "info", "warning", "error", "critical", "passive"});

Section section_optimizer() {
  Section s;
  s.path = "optimizer";
  s.heading = R"md(`optimizer` (required))md";
  s.outro = R"md(The optimizer plugin is `lowercase(optimizer_factory.name)` for `zero_stage: 0` (`adamw`, `muon`)
and `zero<k>_` + that for stage *k* (`zero1_adamw`, `zero3_adamw`, `zero1_muon`); an optimizer without
that variant is refused naming `optimizer.zero_stage`. The whole section, with its defaults, is given to
the plugin; `docs/optimizers.md` lists each optimizer's `optimizer_factory` keys. Configs of older nanotron versions that put `adam_eps`, `adam_beta1`, ... directly
under `optimizer` are refused with a hint to move them into `optimizer_factory`.)md";
  s.keys = {
      Key("optimizer_factory", mapping(), "nanotron",
          R"md(`name` chooses the optimizer (default `adamW`; `muon`: Muon for the hidden matrices, AdamW for
          the rest); the rest (`adam_beta1`, `adam_beta2`, `adam_eps`, `torch_adam_is_fused`; with muon also
          `momentum`, `nesterov`, `ns_steps`, `ns_coefficients`, `update_rms`, `qk_clip_threshold`,
          `muon_named_params`, `adamw_named_params`, `max_muon_matrix_elements`: `docs/optimizers.md`) is
          read strictly by the optimizer plugin, and `config.yaml` shows it with the plugin's defaults)md")
          .read_later(),
      Key("zero_stage", choice({"0", "1", "3"}), "nanotron",
          R"md(ZeRO stage (required in nanotron). `0`: every dp rank holds the whole optimizer state and gets
          whole averaged gradients (all-reduce). `1`: the `zero1_adamw` plugin; each dp rank holds fp32
          masters and Adam moments for its 1/dp shard of every parameter, gets only that shard of the
          averaged gradient (reduce-scatter) and all-gathers the parameters after its update
          (`zero1_muon` likewise, each matrix orthogonalised whole on one owning rank). `3`: the
          `zero3_adamw` plugin; the parameters themselves are kept as 1/dp shards (experts: 1/edp),
          all-gathered around each block's forward and backward and freed after, their gradients
          reduce-scattered into the shards (`docs/zero3.md`); not with the moe model. Stage 2 has
          no plugin)md"),
      Key("weight_decay", number_at_least(0), "nanotron",
          R"md(required in nanotron)md"),
      Key("weight_decay_exclude_named_params", list_of("strings"), "nanotron",
          R"md(regular expressions (ECMAScript syntax, as `std::regex`) over parameter names; each must compile)md"),
      Key("clip_grad", number_above(0).or_null(), "nanotron",
          R"md(clip by the global gradient norm over all ranks (tp-replicated and tied parameters counted
          once); `null`: no clipping (required in nanotron). The logged `grad_norm` is the norm before
          clipping)md"),
      Key("accumulate_grad_in_fp32", boolean(), "nanotron",
          R"md(sum the micro-batches' gradients of bf16/fp16 parameters in fp32 buffers (required in nanotron).
          With one micro-batch a step and no parameter tied across pipeline stages there is nothing to
          sum: the gradients go on as computed (the dp reduction reads fp32 copies), the same values
          without the buffers' 4 bytes a parameter (the start-up log says so))md"),
      Key("learning_rate_scheduler", mapping(), "nanotron",
          R"md(below)md")
          .must_be_given(),
  };
  return s;
}

Section section_optimizer_learning_rate_scheduler() {
  Section s;
  s.path = "optimizer.learning_rate_scheduler";
  s.heading = R"md(`optimizer.learning_rate_scheduler`)md";
  s.level = 4;
  s.outro = R"md(The defaults are nanotron's (`Config.__post_init__`, `LRSchedulerArgs`, `lr_scheduler_builder`).)md";
  s.keys = {
      Key("learning_rate", number_above(0), "nanotron",
          R"md(peak learning rate)md")
          .must_be_given(),
      Key("lr_warmup_steps", integer(0), "nanotron",
          R"md(may exceed `tokens.train_steps`, as in nanotron (whose scheduler only subtracts it): the run
          then ends inside the warm-up, and `lr_decay_steps` defaults to 0. A short check of a long config
          (`--set tokens.train_steps=1`) needs this)md"),
      Key("lr_warmup_style", choice({"linear", "constant"}), "nanotron",
          ""),
      Key("lr_decay_style", choice({"linear", "cosine", "1-sqrt"}), "nanotron",
          ""),
      Key("lr_decay_steps", integer(0).or_null(), "nanotron",
          "")
          .with_default(R"md(`train_steps − lr_warmup_steps`)md"),
      Key("lr_decay_starting_step", integer(0).or_null(), "nanotron",
          R"md(a constant phase at `learning_rate` lasts until this step)md")
          .with_default(R"md(`lr_warmup_steps`)md"),
      Key("min_decay_lr", number_at_least(0).or_null(), "nanotron",
          R"md(at most `learning_rate`; the rate stays here after the decay)md")
          .with_default(R"md(`learning_rate`)md"),
  };
  return s;
}

Section section_data_stages() {
  Section s;
  s.path = "data_stages[]";
  s.heading = R"md(`data_stages` (optional))md";
  s.intro = R"md(A list of stages; each:)md";
  s.keys = {
      Key("name", string(), "nanotron",
          R"md(unique)md")
          .must_be_given(),
      Key("start_training_step", integer(1), "nanotron",
          R"md(unique; one stage must start at step 1)md")
          .must_be_given(),
      Key("data.dataset", mapping().or_null(), "nanotron",
          R"md(`null`: triax's synthetic token stream; a mapping: token folders in nanotron's Nanoset schema
          (below), read strictly by the data loader. A Hugging Face spec (`hf_dataset_or_datasets`) is
          refused with a pointer to `tools/tokenize`)md")
          .read_later(),
      Key("data.source", string(), "triax",
          R"md(the data source that gives the stage's samples (`docs/data-format.md`): `synthetic`, triax's seeded
          Markov token stream (`dataset` must be null); `token_folders`, the token folders of `dataset` mixed by
          weight. Another name is refused before any work (`triax train --check` too), naming the known sources)md")
          .with_default(R"md(`synthetic` if `dataset` is null, else `token_folders`)md"),
      Key("data.seed", integer(0), "nanotron",
          ""),
      Key("data.validation", mapping().or_null(), "triax",
          R"md(the data this stage validates on (`tokens.val_check_interval`), never trained on: either
          `{held_out_fraction: f}` with 0 < f < 1, a seeded choice of `round(f · N)` samples of every training
          folder of N samples, held out of the training stream; or token folders of its own in the Nanoset
          schema below (`{dataset_folder: [...]}`; their tokenizer must be the training data's). Required of
          a stage of token folders when `tokens.val_check_interval > 0`; refused on the synthetic stream, which
          validates on held-out samples of its own stream (`docs/data-format.md`))md")
          .read_later(),
      Key("data.num_loading_workers", integer(0), "nanotron",
          R"md(accepted; triax builds each step's batch on one background thread during the step before, which
          is far faster than any model consumes (see `docs/data-format.md`))md"),
      Key("sequence_length", integer().or_null(), "nanotron (newer)",
          R"md(only `null` or `tokens.sequence_length` (no per-stage length in triax))md")
          .with_default(R"md(`tokens.sequence_length`)md"),
  };
  return s;
}

Section section_data_stages_data_dataset() {
  Section s;
  s.path = "data_stages[].data.dataset";
  s.heading = R"md(`data_stages[].data.dataset` (token folders))md";
  s.level = 4;
  s.intro = R"md(nanotron's `NanosetDatasetsArgs` keys; `docs/data-format.md` describes the files, the mixture
and its exact guarantee, and the checks made before training.)md";
  s.outro = R"md(Stages are sorted by `start_training_step`. If `data_stages` is absent or `null`, there is one
stage: `{name: default, start_training_step: 1, data: {dataset: null, source: synthetic, seed: <general.seed>,
num_loading_workers: 1}}`.)md";
  s.keys = {
      Key("dataset_folder", string_or_list(), "nanotron",
          R"md(token folders (each: `*.ds` files with `.ds.index`, `.ds.metadata`))md")
          .must_be_given(),
      Key("dataset_weights", list_of("numbers > 0").or_null(), "nanotron",
          R"md(one per folder, normalised; `null`: proportional to the folders' sample counts)md"),
      Key("dataset_read_path", string_or_list().or_null(), "nanotron",
          R"md(one per folder: read from there instead when it exists)md"),
      Key("tokenizer_name", string().or_null(), "nanotron",
          R"md(if given, the files' metadata must name this tokenizer)md"),
      Key("vocab_size", integer(1).or_null(), "nanotron",
          R"md(if given, must equal `model.model_config.vocab_size` (every token id is checked against the
          model's))md"),
      Key("token_size_in_bytes", choice({"2", "4"}).or_null(), "nanotron",
          R"md(used for files without metadata (else 2); files whose metadata says otherwise are refused)md"),
      Key("return_positions", boolean(), "nanotron",
          R"md(accepted; positions are numbered per sample)md"),
      Key("skip_in_stream", boolean(), "nanotron",
          R"md(accepted; resumption is exact either way)md"),
      Key("pad_samples_to_global_batch_size", boolean(), "nanotron",
          R"md(only `false`)md"),
      Key("dataset_max_tokens", list_of("ints ≥ 1").or_null(), "nanotron",
          R"md(one per folder: use only its first `⌊max / sequence_length⌋` samples)md"),
      Key("shuffle_files", boolean(), "nanotron",
          R"md(files in an order seeded by `data.seed` instead of by name)md"),
      Key("use_old_brrr_dataloader", boolean(), "nanotron",
          R"md(only `false`)md"),
  };
  return s;
}

Section section_logging() {
  Section s;
  s.path = "logging";
  s.heading = R"md(`logging` (optional))md";
  s.keys = {
      Key("log_level", choice({"debug", "info", "warning", "error", "critical", "passive"}), "nanotron",
          R"md(rank 0)md"),
      Key("log_level_replica", kLogLevels, "nanotron",
          R"md(other ranks)md"),
      Key("iteration_step_info_interval", integer(1), "nanotron",
          R"md(log a step line every N steps)md"),
      Key("peak_tflops", number_above(0).or_null(), "triax",
          R"md(per-device peak TFLOP/s used for MFU; `null`: the device's known peak)md"),
      Key("tensorboard", boolean(), "triax",
          R"md(TensorBoard event files (`events.out.tfevents.*`) with every number of `metrics.jsonl`, tagged
          by its JSON key (`loss`, `aux_losses/NAME`, `lr`, `grad_norm`, `tokens_per_s`, `mfu`,
          `peak_memory_bytes`, `data_consumed_samples/FOLDER`, ...))md"),
      Key("tensorboard_dir", string().or_null(), "triax",
          R"md(their folder; `null`: the run folder, beside `metrics.jsonl`. Checked writable before step 1)md"),
      Key("progress", choice({"auto", "always", "never"}), "triax",
          R"md(one live progress line (step, s/step, ETA) between log lines; `auto`: only when stderr is a
          terminal)md"),
  };
  return s;
}

Section section_profiler() {
  Section s;
  s.path = "profiler";
  s.heading = R"md(`profiler` (optional, nanotron))md";
  s.intro = R"md(`null` or absent: no profiling. A mapping records LibTorch profiler (Kineto) traces of the steps
that `torch.profiler.schedule` picks: the first `skip_first` steps of the run are skipped, then
`repeat` cycles (0: until the end) of `wait` steps off, `warmup` steps profiled and discarded,
`active` steps recorded. After each cycle every rank writes
`<profiler_export_path>/rank<R>_steps<A>-<B>.pt.trace.json`, a Chrome trace (TensorBoard's
profiler plugin, `chrome://tracing`, Perfetto). The trace holds a range per pipeline block
(`block embedding`, `block layer N`, `block head`) and per micro-batch pass
(`forward micro-batch M of chunk C`); on CUDA builds the same ranges are NVTX ranges, which
Nsight Systems shows on the GPU timeline.)md";
  s.keys = {
      Key("profiler_export_path", string(), "nanotron",
          R"md(created if missing; checked writable before step 1)md")
          .must_be_given(),
      Key("wait", integer(0), "nanotron",
          ""),
      Key("warmup", integer(0), "nanotron",
          ""),
      Key("active", integer(1), "nanotron",
          ""),
      Key("repeat", integer(0), "nanotron",
          ""),
      Key("skip_first", integer(0), "nanotron",
          ""),
      Key("record_shapes", boolean(), "nanotron",
          R"md(operator input shapes)md"),
      Key("profile_memory", boolean(), "nanotron",
          R"md(allocations)md"),
      Key("with_stack", boolean(), "nanotron",
          ""),
      Key("export_chrome_trace", boolean(), "nanotron",
          R"md(accepted: the trace is a Chrome trace either way)md"),
  };
  return s;
}

Section section_fp8() {
  Section s;
  s.path = "fp8";
  s.heading = R"md(`fp8` (optional, **triax**))md";
  s.origin_column = false;
  s.intro = R"md(`null` or absent: no fp8. A mapping (`{}` for the defaults) trains the chosen column- and
row-parallel linears in fp8: weights, activations and gradients are cast to fp8 with scales
computed on the fly every step, the products run through `at::_scaled_mm` (GPUs of compute
capability 8.9 or newer; the CPU emulates them), the parameters, master weights and optimizer are
unchanged. The embedding, the output head and the MoE router stay in the model's dtype; the MoE
experts (a module such as `model.layers.1.mlp.experts`, chosen like a linear) train in fp8 with
`rowwise` only, through `at::_scaled_grouped_mm` (compute capability 9.x and 10.x; elsewhere in the
model's dtype). `docs/fp8.md`.)md";
  s.keys = {
      Key("recipe", choice({"tensorwise", "rowwise"}), "triax",
          R"md(`tensorwise`: one scale per tensor, activations and weights in e4m3, gradients in e5m2;
          `rowwise`: one scale per row along each product's contraction dimension, every operand in
          e4m3)md"),
      Key("linears", list_of("patterns"), "triax",
          R"md(`["*"]`: every decoder linear. Patterns over the linears' module names, `*` matching
          any run of characters (`model.layers.*.mlp.*`: the MLPs only); each chosen layer's
          dimensions on its tensor-parallel rank must be multiples of 16)md"),
      Key("min_gemm_size", integer(0), "triax",
          R"md(with the default `linears`, a layer whose weight on its tensor-parallel rank has a side
          (the N or K of its products) below this stays in the model's dtype: its products are too
          small for fp8 to repay the casts (SmolLM-135M and 360M have no side of 1024). `0` takes
          every linear; a `linears` list of the config's own takes exactly the layers it names,
          whatever their size)md"),
  };
  return s;
}

Section section_plugins() {
  Section s;
  s.path = "plugins";
  s.heading = R"md(`plugins` (optional, **triax**))md";
  s.origin_column = false;
  s.keys = {
      Key("paths", list_of("strings"), "triax",
          R"md(extra folders searched for plugin libraries, in addition to the build's plugin folder and
          `TRIAX_PLUGIN_PATH`)md"),
  };
  return s;
}

Section section_null_only() {
  Section s;
  s.path = "";
  s.heading = "Accepted only as `null`";
  s.intro = R"md(nanotron sections for features triax does not implement may be absent or `null`; any other
value stops with `<key>: triax does not implement ...; set it to null`.)md";
  s.keys = {
      Key("lighteval", null_only(), "nanotron", "lighteval evaluation"),
      Key("s3_upload", null_only(), "nanotron", "uploading checkpoints to S3"),
      Key("metrics_logging", null_only(), "nanotron", "triax writes its own metrics file (`metrics.jsonl`)"),
  };
  return s;
}

}  // namespace

std::vector<Section> training_sections() {
  return {section_optimizer(), section_optimizer_learning_rate_scheduler(), section_data_stages(),
          section_data_stages_data_dataset(), section_logging(), section_profiler(), section_fp8(), section_plugins(),
          section_null_only()};
}

}  // namespace triax::config_reference
