// The reference's run-level sections: general, checkpoints, parallelism, model, tokenizer, tokens.
// Notes are markdown; a line break inside one is a space in the table.
#include "reference_tables.hpp"

namespace triax::config_reference {
namespace {

Section section_general() {
  Section s;
  s.path = "general";
  s.heading = R"md(`general` (optional))md";
  s.keys = {
      Key("project", string(), "nanotron",
          R"md(required in nanotron)md"),
      Key("run", string(), "nanotron",
          R"md(`%date` → `YYYYmmdd_HHMMSS` (local time at load), `%jobid` → `$SLURM_JOB_ID` or `local`. If
          `TRIAX_RUN_DATE` is set in the environment, its value replaces `%date` instead of the clock, so
          that every rank of a job names the same run)md")
          .with_default(R"md(`%date_%jobid`)md"),
      Key("seed", integer(0), "nanotron",
          ""),
      Key("step", integer(0).or_null(), "nanotron",
          R"md(accepted; the step comes from the checkpoint on resume)md"),
      Key("consumed_train_samples", integer(0).or_null(), "nanotron",
          R"md(accepted; see `step`)md"),
      Key("benchmark_csv_path", string().or_null(), "nanotron",
          R"md(at the end of the run rank 0 appends one CSV row (date, config, run, model, parameters, device,
          world size, dp/tp/pp/ep, engine, ZeRO stage, tp mode, batch shape, global batch tokens, steps,
          tokens/s, tokens/s/device, model TFLOP/s/device, MFU, peak memory), with a header when the file
          is new; the throughput is the mean over the steps after the first logged one. Checked writable
          before step 1)md"),
      Key("ignore_sanity_checks", boolean(), "nanotron",
          ""),
      Key("device", choice({"auto", "cpu", "cuda"}), "triax",
          R"md(`auto`: CUDA when available, else CPU)md"),
      Key("nonfinite_policy", choice({"stop", "skip"}), "triax",
          R"md(a non-finite loss or gradient norm: `stop` ends the run (status 1) naming the step and the last
          good checkpoint, checked on logged steps and before every save; `skip` drops that step's update
          before the optimizer runs (parameters and optimizer state unchanged; data and learning rate move
          on), logs and counts it (`skipped_steps` in `metrics.jsonl`), at the cost of one host read per
          step. See `docs/reliability.md`)md"),
      Key("nonfinite_max_consecutive_skips", integer(1), "triax",
          R"md(with `skip`: one more non-finite step in a row stops the run as `stop` does)md"),
      Key("preemption_signals", list_of("`SIGTERM`, `SIGUSR1`, `SIGUSR2`, `SIGINT`, `SIGHUP`"), "triax",
          R"md(any of them on any rank stops every rank at the next step boundary with a checkpoint, exit
          status 0; a second one aborts that save (the previous checkpoint stays `latest`). `[]` keeps the
          signals' default action)md"),
      Key("cuda_graphs", boolean(), "triax",
          R"md(the forward and backward of a step's micro-batches (with their gradient accumulation) are captured
          once as a CUDA graph, at the second step of the process, and replayed on every later step;
          the optimizer, clipping and data-parallel reductions stay outside it. Needs a CUDA device, `tp =
          1` and `pp = 1`; with `dp > 1` the reductions run after the backward instead of overlapping
          it. A step that cannot be captured (a host synchronisation or a data-dependent shape inside
          the model, as in mixture-of-experts dispatch) stops the run naming the model and engine
          plugins. Losses equal the run without graphs bit for bit. See `docs/performance.md`)md"),
  };
  return s;
}

Section section_checkpoints() {
  Section s;
  s.path = "checkpoints";
  s.heading = R"md(`checkpoints` (optional))md";
  s.outro = R"md(Relative paths are relative to the working directory, as in nanotron.)md";
  s.keys = {
      Key("checkpoints_path", string(), "nanotron",
          R"md(folder of the run's checkpoints; it is also **the run folder** (resolved config, metrics). If
          the whole section is absent: `runs/<general.run>` (relative to the working directory))md")
          .must_be_given()
          .with_default("— (if the section is given)"),
      Key("checkpoint_interval", integer(0), "nanotron",
          R"md(save every N steps and after the last step; `0`: no periodic checkpoints (required in nanotron).
          Format and crash safety: `docs/checkpoint-format.md`)md"),
      Key("save_initial_state", boolean(), "nanotron",
          R"md(save step 0, before training)md"),
      Key("save_final_state", boolean(), "nanotron",
          R"md(save after the last step even with `checkpoint_interval: 0`; newer nanotron defaults to `true`)md"),
      Key("resume_checkpoint_path", string().or_null(), "nanotron",
          R"md(a step folder, or a checkpoints folder whose `latest` names one; loads at any
          dp/tp/pp/zero_stage and continues at the next step)md"),
      Key("load_lr_scheduler", boolean(), "nanotron",
          R"md(on resume: continue the saved schedule; `false`: the config's schedule at the resumed step)md"),
      Key("load_optimizer", boolean(), "nanotron",
          R"md(on resume: fp32 masters and Adam moments; `false`: fresh moments)md"),
      Key("checkpoints_path_is_shared_file_system", boolean(), "nanotron",
          R"md(accepted; every rank must reach `checkpoints_path` (a save fails on every rank, naming the
          missing file, when rank 0 cannot see another rank's file))md"),
      Key("keep_last", integer(0), "triax",
          R"md(keep only the newest N complete checkpoints (never removing the one `latest` names); `0` keeps
          all)md"),
      Key("async_save", boolean(), "triax",
          R"md(each rank copies what it saves into host buffers (pinned, reused; one checkpoint's bytes of the
          rank) and training goes on while a thread writes the files; same format and crash safety, at most
          one save in flight. See docs/reliability.md, "Asynchronous saves")md"),
  };
  return s;
}

// The mesh: the parallel sizes and how context-parallel attention reaches its peers.
std::vector<Key> parallelism_mesh_keys() {
  return {
      Key("dp", integer(1), "nanotron",
          R"md(data-parallel replicas (required in nanotron))md"),
      Key("pp", integer(1), "nanotron",
          R"md(pipeline stages (required in nanotron))md"),
      Key("tp", integer(1), "nanotron",
          R"md(tensor-parallel ranks (required in nanotron))md"),
      Key("expert_parallel_size", integer(1), "nanotron",
          R"md(expert parallelism of mixture-of-experts layers, inside dp: must divide `dp`)md"),
      Key("context_parallel_size", integer(1), "nanotron",
          R"md(context parallelism: this many ranks hold slices of the same sequences (rank `i` holds chunks `i`
          and `2·cp−1−i` of `2·cp`), so `tokens.sequence_length` must be a multiple of `2·cp`; attention
          all-gathers K/V over them, the loss and the gradients are averaged over `dp·cp`. A model plugin
          without attention, or with layers whose state is not passed between cp ranks, is refused, by
          name. See
          docs/context_parallelism.md)md"),
      Key("context_parallel_attention", choice({"all_gather", "ring"}), "triax",
          R"md(how attention reaches the other cp ranks' keys, with `context_parallel_size > 1`: `all_gather`
          gathers the whole K/V in one collective per layer (fewer, larger calls; the choice inside a
          node); `ring` passes K/V blocks around the cp ranks, overlapping each transfer with one block's
          attention and merging the partial softmaxes (one remote block held at a time and no
          `[sequence/cp, sequence]` mask). Same results within rounding. See docs/context_parallelism.md)md"),
  };
}

// How the mesh runs a step: the engine, tensor-parallel mode, recomputation, communication.
std::vector<Key> parallelism_schedule_keys() {
  return {
      Key("pp_engine", string(), "nanotron",
          R"md(the engine plugin's name: `afab` (every forward, then every backward) or `1f1b` (at most `pp -
          pp_rank` micro-batches in flight; needs `batch_accumulation_per_replica >= pp - 1`), or
          `interleaved_1f1b` (with `pp_chunks_per_rank`), or `zb_h1` or `zb_v` (zero-bubble: each backward
          split into input and weight gradients, the latter filling the bubbles; `zb_v` holds two model
          chunks per rank in a V; both need `batch_accumulation_per_replica >= pp`;
          `docs/pipeline-schedules.md`), or any loaded engine plugin)md"),
      Key("tp_mode", choice({"ALL_REDUCE", "REDUCE_SCATTER"}), "nanotron",
          R"md(any letter case; `REDUCE_SCATTER` is sequence parallelism and needs `tokens.sequence_length`
          divisible by `tp`)md"),
      Key("tp_linear_async_communication", boolean(), "nanotron",
          R"md(with `tp > 1`, column-parallel layers overlap their collective with their GEMMs: with
          `REDUCE_SCATTER` each rank multiplies its own sequence rows while the others' are gathered and, in
          backward, reduce-scatters the input gradient during the weight gradient's GEMM; with `ALL_REDUCE`
          the input gradient's all-reduce runs during that GEMM. Same results within rounding)md"),
      Key("recompute_layer", boolean(), "nanotron",
          R"md(activation recomputation: each decoder layer keeps only its input between forward and backward
          and runs its forward again in backward (`triax/layers/recompute.hpp`; tensor-parallel
          collectives run again too). Same loss and gradients; less activation memory for about one more
          forward of the layers per step (MFU still counts model FLOPs only))md"),
      Key("moe_layer_recompute", boolean(), "nanotron",
          R"md(recompute only the mixture-of-experts block of each MoE layer (router, token dispatch, experts
          and shared expert; Megatron's key of the same name): it keeps only its input, and runs again
          in backward, token exchange included. The router's losses keep their gradient
          (`triax/layers/side_outputs.hpp`). Beside `recompute_layer` it nests inside the layer's
          recomputation. Models without MoE layers ignore it)md"),
      Key("tp_recompute_allgather", boolean(), "nanotron",
          R"md(accepted, not acted on: sequence-parallel layers keep their gathered input for backward)md"),
      Key("comm_backend", choice({"auto", "mpi", "nccl"}), "triax",
          R"md(`auto`: under a launcher NCCL on CUDA, MPI on CPU; a single process started by hand uses none)md"),
      Key("comm_timeout_seconds", number_above(0), "triax",
          R"md(a collective or transfer waiting this long on a silent peer fails every rank with a message
          naming the step and the peer)md"),
  };
}

// Finer choices: pipeline chunks and blocks, partial and selective recomputation.
std::vector<Key> parallelism_placement_keys() {
  return {
      Key("pp_chunks_per_rank", integer(1), "triax",
          R"md(model chunks per pipeline rank for `pp_engine: interleaved_1f1b` (Megatron's interleaved 1F1B):
          the blocks are cut into `pp × pp_chunks_per_rank` virtual stages, chunk `c` of rank `r` holding
          virtual stage `c·pp + r`. `1` is plain 1F1B. Above 1 it needs `pp ≥ 2`,
          `batch_accumulation_per_replica` a multiple of `pp`, at least `pp × pp_chunks_per_rank` pipeline
          blocks, and an engine that runs that many chunks (others refuse it; `zb_v` runs 2, placed in a V,
          whether this key says 1 or 2))md"),
      Key("pp_blocks_per_stage", list_of("integers").or_null(), "triax",
          R"md(how many of the model's pipeline blocks (embedding, each layer, head) each pipeline rank holds,
          in order: `pp` counts, or `pp × pp_chunks_per_rank` in virtual stage order when chunks are
          interleaved; by default contiguous runs of blocks are balanced by their compute cost)md")
          .with_default(R"md(balanced)md"),
      Key("pp_pass_times", list_of("3 numbers > 0").or_null(), "triax",
          R"md(`[F, B, W]`: the times (any unit) of one micro-batch's forward, input backward and weight
          backward through one pipeline stage, as `triax inspect schedule --measure` prints them; `zb_h1`
          and `zb_v` order their passes for them (with F, B and W far from equal the order of equal times
          idles longer). Other engines ignore it)md")
          .with_default(R"md(equal times)md"),
      Key("pp_pass_record", boolean(), "triax",
          R"md(every rank writes `<run folder>/pass_record/rank<R>.jsonl`: per step a JSON line with the
          start and wall time of each forward, backward (B and W when split) and transfer its pipeline
          engine ran, per model chunk and micro-batch (receives include their wait), and the step's parts
          outside the engine (gradient reduction and norm, optimizer); the device is waited for after each.
          `triax inspect schedule --record <run folder>` predicts the step from it. Off: nothing timed.
          Not with `general.cuda_graphs`)md"),
      Key("recompute_num_layers", integer(1).or_null(), "triax",
          R"md(with `recompute_layer: true`: recompute only the first N decoder layers of each pipeline stage
          (Megatron's `--recompute-num-layers` with the block method; with 1F1B the first layers hold the
          most micro-batches in flight), trading part of the memory for part of the time; `null`: every
          layer. Refused without `recompute_layer: true`)md")
          .valid_beside("parallelism.recompute_layer=true"),
      Key("recompute_mlp_activation", boolean(), "triax",
          R"md(selective recomputation: the MLP's activation output (SwiGLU's, GELU's, relu²'s) is not kept
          between forward and backward; the backward runs the activation again from its input, one elementwise
          pass per layer (`triax/layers/recomputed_activation.hpp`). Saves `ffn / tp` values per token and
          layer (a quarter of a SwiGLU decoder layer's activations at hidden 2048, ffn 11008) for a small
          fraction of a whole layer's recomputation; the same loss and gradients. Beside `recompute_layer`
          with `recompute_num_layers` it thins the layers that keep their activations. The model plugin
          must declare support (`TRIAX_MODEL_RECOMPUTE_MLP_ACTIVATION`, ABI 1.7); one that does not is
          refused by name before the first step)md"),
  };
}

Section section_parallelism() {
  Section s;
  s.path = "parallelism";
  s.heading = R"md(`parallelism` (optional))md";
  s.outro = R"md(The launch must start exactly `dp·tp·pp·context_parallel_size` processes; otherwise the run
stops with a configuration error naming the keys and the world size. The whole section (with its
defaults) is given to the engine plugin.)md";
  s.keys = parallelism_mesh_keys();
  for (const std::vector<Key>& group : {parallelism_schedule_keys(), parallelism_placement_keys()})
    s.keys.insert(s.keys.end(), group.begin(), group.end());
  return s;
}

Section section_model() {
  Section s;
  s.path = "model";
  s.heading = R"md(`model` (required))md";
  s.keys = {
      Key("plugin", string(), "triax",
          R"md(the model plugin's name (any loaded model plugin; `triax plugins` lists them). Left out: the
          plugin whose nanotron marker key is in `model_config` (a marker with the key it requires wins
          over the same marker alone, so one marker may serve two plugins told apart by a second key;
          none or several is an error listing every plugin and its marker), or, with `init_method.path` naming a Hugging Face folder, the
          plugin reading its config.json `architectures`)md")
          .with_default(R"md(chosen)md"),
      Key("model_config", mapping(), "nanotron",
          R"md(the architecture's hyper-parameters, read strictly by the model plugin (the shipped plugins'
          keys: the README's section on each). May be left out when `init_method.path` names a Hugging
          Face folder: the plugin translates its config.json, and the run folder's `config.yaml` shows
          the result; keys given beside such a folder are laid over that translation (a key that
          changes a weight's shape from the folder's is refused, naming both). Before the model is
          built, its parameters, their gradients and AdamW's state must fit the memory the device has
          free (on CPU `MemAvailable`), or the run is refused with the numbers. Two keys of the decoders built on the SDK's attention concern the data too:
          `_use_doc_masking` (default `false`; attention stays inside each document of a sample,
          positions restart per document, the label starting the next document leaves the loss;
          needs a token dataset with `.ds.index` files in every stage, the synthetic stream has no
          documents) and `sliding_window_size` (default `null`; a query sees itself and the w − 1
          tokens before it, as flash-attention's `window_size = (w − 1, 0)`; at least 1 and at most
          `tokens.sequence_length`); `docs/data-format.md`, *Document masking*)md")
          .must_be_given()
          .read_later(),
      Key("init_method", mapping(), "nanotron",
          R"md(how weights start, read by the model plugin; `{std: 0.02}` (random normal, read by the model
          plugin) or `{path: <folder>}`: weights from a triax checkpoint (a step folder or a checkpoints
          folder with `latest`, at any topology) or a Hugging Face folder, training from step 1;
          `{use_mup: true}`: spectral µP, per-parameter initialisation and learning rates from each
          weight's fans, for the plugins that declare support (`docs/mup.md`), without `std` or
          `scaling_method`)md")
          .must_be_given()
          .read_later(),
      Key("dtype", choice({"float32", "bfloat16", "float16", "float64"}), "nanotron",
          R"md(parameter and compute dtype; `torch.bfloat16`-style spellings are accepted and normalised)md"),
      Key("make_vocab_size_divisible_by", integer(1), "nanotron",
          R"md(the vocabulary is padded to a multiple of this × `tp`)md"),
      Key("ddp_bucket_cap_mb", integer(1), "nanotron",
          R"md(MiB of gradients per data-parallel collective: gradients are averaged over dp in buckets of at
          most this size (a larger parameter travels alone), one all-reduce (or reduce-scatter with
          `zero_stage: 1`) per bucket)md"),
  };
  return s;
}

Section section_tokenizer() {
  Section s;
  s.path = "tokenizer";
  s.heading = R"md(`tokenizer` (optional))md";
  s.notes_column = false;
  s.keys = {
      Key("tokenizer_name_or_path", string().or_null(), "nanotron",
          ""),
      Key("tokenizer_revision", string().or_null(), "nanotron",
          ""),
      Key("tokenizer_max_length", integer(1).or_null(), "nanotron",
          ""),
  };
  return s;
}

Section section_tokens() {
  Section s;
  s.path = "tokens";
  s.heading = R"md(`tokens` (required))md";
  s.keys = {
      Key("sequence_length", integer(1), "nanotron",
          R"md(tokens per sample)md")
          .must_be_given(),
      Key("train_steps", integer(1), "nanotron",
          R"md(optimizer steps of the whole run)md")
          .must_be_given(),
      Key("micro_batch_size", integer(1), "nanotron",
          R"md(samples per micro-batch per dp replica)md")
          .must_be_given(),
      Key("batch_accumulation_per_replica", integer(1), "nanotron",
          R"md(micro-batches per step; global batch = `micro_batch_size · batch_accumulation_per_replica · dp`)md")
          .must_be_given(),
      Key("val_check_interval", integer(-1), "nanotron",
          R"md(validate every this many steps and after the last step (`-1` or `0`: no validation): the
          validation loss and perplexity of `limit_val_batches` held-out micro-batches per replica, without
          gradients, in the log, `metrics.jsonl` and TensorBoard. Every data stage of token folders then needs
          `data.validation`)md"),
      Key("limit_val_batches", integer(0), "nanotron",
          R"md(validation micro-batches of `micro_batch_size` samples each data-parallel replica evaluates (so
          `limit_val_batches · micro_batch_size · dp` samples per validation, the same ones every time); at
          least 1 when `val_check_interval > 0`)md"),
      Key("limit_test_batches", integer(0), "nanotron",
          R"md(accepted)md"),
  };
  return s;
}

}  // namespace

std::vector<Section> run_sections() {
  return {section_general(), section_checkpoints(), section_parallelism(),
          section_model(),   section_tokenizer(),   section_tokens()};
}

}  // namespace triax::config_reference
