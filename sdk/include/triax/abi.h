/*
 * triax plugin ABI: the only thing that crosses a shared-library boundary.
 *
 * Plain C (C99). A plugin library exports one function,
 *
 *     const triax_plugin_manifest* triax_plugin_entry(void);
 *
 * returning a manifest: the ABI version it was built for, the LibTorch version and C++ ABI flag
 * it was compiled with, and its plugins. Each plugin is a descriptor (kind, name, version,
 * description) plus a table of C function pointers over opaque handles. No C++ type, exception
 * or STL object crosses this boundary: failures come back as a status plus a message written
 * into a caller-owned triax_error.
 *
 * Versioning: the host refuses a library whose abi_major differs from its own. Minor versions
 * only append members at the end of tables and structs; every table starts with its own size,
 * so a host can tell which members an older plugin provides.
 *
 * Tensors cross as triax_tensor handles. A LibTorch tensor's storage is shared memory between
 * host and plugin, which is sound because the host refuses plugins built against another
 * LibTorch version or C++ ABI. Ownership rule: a handle passed into a function is borrowed for
 * the duration of the call; a handle written into an out-field is a new reference that the
 * receiver owns (the C++ SDK wraps both directions, see triax/tensor_handle.hpp).
 */
#ifndef TRIAX_ABI_H
#define TRIAX_ABI_H

#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

#define TRIAX_ABI_VERSION_MAJOR 1
#define TRIAX_ABI_VERSION_MINOR 15
#define TRIAX_PLUGIN_ENTRY_SYMBOL "triax_plugin_entry"
#define TRIAX_ERROR_MESSAGE_CAPACITY 4096
#define TRIAX_MAX_TENSOR_DIMS 8
#define TRIAX_MAX_AUX_LOSSES 8        /* named auxiliary losses per model (ABI 1.3) */
#define TRIAX_MAX_BOUNDARY_TENSORS 4  /* tensors crossing one pipeline boundary (ABI 1.3) */

#if defined(_WIN32)
#define TRIAX_PLUGIN_EXPORT __declspec(dllexport)
#else
#define TRIAX_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ---- status and errors ---------------------------------------------------------------- */

typedef enum triax_status {
  TRIAX_OK = 0,
  TRIAX_ERROR_INVALID_CONFIG = 1, /* a configuration value is wrong: the message names its key */
  TRIAX_ERROR_INVALID_ARGUMENT = 2,
  TRIAX_ERROR_UNSUPPORTED = 3, /* a valid request this plugin does not implement */
  TRIAX_ERROR_RUNTIME = 4      /* anything else that went wrong while running */
} triax_status;

typedef struct triax_error {
  char message[TRIAX_ERROR_MESSAGE_CAPACITY]; /* NUL-terminated; written by the callee on failure */
} triax_error;

/* ---- opaque handles ----------------------------------------------------------------------- */

typedef struct triax_tensor triax_tensor;       /* a LibTorch tensor (see ownership rule above) */
typedef struct triax_model triax_model;         /* a model plugin instance */
typedef struct triax_engine triax_engine;       /* a pipeline engine plugin instance */
typedef struct triax_optimizer triax_optimizer; /* an optimizer plugin instance */
typedef struct triax_cache triax_cache;         /* since 1.3: a model's inference cache of one sequence */

/* Since 1.3: where a callee writes text of its own (YAML, JSON), appending as often as it likes
 * during the call; the caller owns what was appended. */
typedef struct triax_text_sink {
  void* self;
  void (*append)(void* self, const char* text, size_t length);
} triax_text_sink;

/* since 1.6: a collective in flight, started by triax_host.start_* and ended by its finish */
typedef struct triax_pending triax_pending;

/* ---- host services ----------------------------------------------------------------------- */

/* Process groups of the mesh (world = dp x pp x tp; ep lives inside dp for MoE). */
typedef enum triax_group {
  TRIAX_GROUP_WORLD = 0,
  TRIAX_GROUP_TP = 1,
  TRIAX_GROUP_PP = 2,
  TRIAX_GROUP_DP = 3,
  TRIAX_GROUP_MP = 4, /* tp x pp: the ranks holding one model replica */
  TRIAX_GROUP_EP = 5, /* the dp ranks holding different expert shards (size expert_parallel_size) */
  /* since 1.3: the dp ranks holding the same expert shard (size dp / ep): expert gradients are
   * averaged over it. Within dp, ep is fastest: dp_rank = edp_rank * ep + ep_rank. */
  TRIAX_GROUP_EDP = 6,
  /* since 1.10: context parallelism (parallelism.context_parallel_size). CP: the ranks holding
   * slices of the same sequences. Gradients (and ZeRO shards) of dense parameters span dp x cp,
   * those of expert shards edp x cp: the host resolves a parameter's gradient_group DP or EDP to
   * these when cp > 1, so a model never names them. */
  TRIAX_GROUP_CP = 7,
  TRIAX_GROUP_DP_CP = 8,
  TRIAX_GROUP_EDP_CP = 9
} triax_group;

typedef enum triax_reduce_op {
  TRIAX_REDUCE_SUM = 0,
  TRIAX_REDUCE_AVG = 1,
  TRIAX_REDUCE_MAX = 2,
  TRIAX_REDUCE_MIN = 3
} triax_reduce_op;

typedef enum triax_log_level {
  TRIAX_LOG_DEBUG = 0,
  TRIAX_LOG_INFO = 1,
  TRIAX_LOG_WARNING = 2,
  TRIAX_LOG_ERROR = 3
} triax_log_level;

/* Services the host offers plugins: logging and collectives over the mesh's groups, in place on
 * borrowed tensors, called by every rank of the group in the same order (via the SDK's layers). */
typedef struct triax_host {
  size_t struct_size;
  void* self;
  void (*log)(void* self, triax_log_level level, const char* message);
  int32_t (*group_rank)(void* self, triax_group group);
  int32_t (*group_size)(void* self, triax_group group);
  triax_status (*all_reduce)(void* self, triax_group group, triax_tensor* tensor, triax_reduce_op op,
                             triax_error* error);
  /* output = concatenation of every rank's input along dim 0 (output holds size x input) */
  triax_status (*all_gather)(void* self, triax_group group, triax_tensor* output, triax_tensor* input,
                             triax_error* error);
  /* output = this rank's dim-0 slice of the reduction of every rank's input */
  triax_status (*reduce_scatter)(void* self, triax_group group, triax_tensor* output, triax_tensor* input,
                                 triax_reduce_op op, triax_error* error);
  triax_status (*broadcast)(void* self, triax_group group, triax_tensor* tensor, int32_t root, triax_error* error);
  /* equal dim-0 splits of input go to each rank in order; output receives theirs likewise */
  triax_status (*all_to_all)(void* self, triax_group group, triax_tensor* output, triax_tensor* input,
                             triax_error* error);
  /* point-to-point with a peer given as a rank within the group */
  triax_status (*send)(void* self, triax_group group, triax_tensor* tensor, int32_t peer, triax_error* error);
  triax_status (*recv)(void* self, triax_group group, triax_tensor* tensor, int32_t peer, triax_error* error);
  triax_status (*barrier)(void* self, triax_group group, triax_error* error);
  /* since 1.3 (present when struct_size covers it): all-to-all with variable splits. Rank i of
   * the group sends input rows [sum(input_splits[0..j)), +input_splits[j]) to rank j and receives
   * output_splits[j] rows from rank j, placed in order. Each splits array has one entry per rank
   * of the group; rows are counted along dim 0, the other dimensions equal on every rank. */
  triax_status (*all_to_all_v)(void* self, triax_group group, triax_tensor* output, triax_tensor* input,
                               const int64_t* output_splits, const int64_t* input_splits, triax_error* error);
  /* since 1.6: all_reduce, all_gather and reduce_scatter started without waiting, to overlap them
   * with computation. *pending receives the operation; finish waits for it (on CUDA: orders the
   * caller's current stream after it) and releases it. The host holds its own references to the
   * tensors, which the caller leaves untouched until then. Every started operation is finished
   * once, by every rank of the group in the same order. */
  triax_status (*start_all_reduce)(void* self, triax_group group, triax_tensor* tensor, triax_reduce_op op,
                                   triax_pending** pending, triax_error* error);
  triax_status (*start_all_gather)(void* self, triax_group group, triax_tensor* output, triax_tensor* input,
                                   triax_pending** pending, triax_error* error);
  triax_status (*start_reduce_scatter)(void* self, triax_group group, triax_tensor* output, triax_tensor* input,
                                       triax_reduce_op op, triax_pending** pending, triax_error* error);
  triax_status (*finish)(void* self, triax_pending* pending, triax_error* error);
  /* since 1.10: one step of a ring, started without waiting: send `send` to group rank send_peer
   * and receive `recv` from group rank recv_peer, both posted together so that neither blocks the
   * other (ring attention passes K/V around the cp group this way). Finished like the others. */
  triax_status (*start_send_recv)(void* self, triax_group group, triax_tensor* send, int32_t send_peer,
                                  triax_tensor* recv, int32_t recv_peer, triax_pending** pending,
                                  triax_error* error);
} triax_host;

/* ---- models --------------------------------------------------------------------------------- */

/* Where the model instance lives in the mesh and how it is built. */
typedef struct triax_model_context {
  size_t struct_size;
  int32_t tp_rank, tp_size;
  int32_t pp_rank, pp_size;
  int32_t dp_rank, dp_size;
  /* The model's blocks (see describe_blocks) that this pipeline rank holds: [first, last). */
  int32_t first_block, last_block;
  const char* device;                   /* "cpu", "cuda:0", ... */
  const char* dtype;                    /* parameter dtype: "float32", "bfloat16", "float16", "float64" */
  uint64_t seed;                        /* initialisation seed; identical on every rank */
  const char* init_method_yaml;         /* model.init_method as YAML (std, scaling, path, ...) */
  int32_t tp_mode;                      /* 0 = ALL_REDUCE, 1 = REDUCE_SCATTER (sequence parallel) */
  int64_t make_vocab_size_divisible_by; /* pad the vocabulary to a multiple of this x tp_size */
  const triax_host* host;
  int32_t recompute_layer; /* since 1.2: parallelism.recompute_layer (recompute activations in backward) */
  /* since 1.3: an engine may ask for several model chunks per pipeline rank (interleaved 1F1B);
   * this instance is chunk `chunk_index` of `chunk_count` on this rank and holds virtual
   * pipeline stage `virtual_stage` of `virtual_stage_count` = pp_size * chunk_count (chunk c of
   * pipeline rank r is virtual stage c * pp_size + r). With one chunk these are 0, 1, pp_rank,
   * pp_size. The first virtual stage embeds tokens, the last computes the loss. */
  int32_t chunk_index, chunk_count;
  int32_t virtual_stage, virtual_stage_count;
  /* since 1.3: expert parallelism inside dp (parallelism.expert_parallel_size): this rank's
   * position in its ep and edp groups (see TRIAX_GROUP_EP / TRIAX_GROUP_EDP). */
  int32_t ep_rank, ep_size;
  int32_t edp_rank, edp_size;
  int32_t recompute_layer_count; /* since 1.5: recompute only the stage's first this many layers; 0/short: all */
  /* since 1.6: parallelism.tp_linear_async_communication, set only where tp_size > 1: column-
   * parallel layers overlap their collective with their GEMMs (triax_host.start_*) */
  int32_t tp_linear_async_communication;
  /* since 1.7: parallelism.recompute_mlp_activation, set only for a model declaring
   * TRIAX_MODEL_RECOMPUTE_MLP_ACTIVATION: the MLP's activation output is recomputed in backward */
  int32_t recompute_mlp_activation;
  /* since 1.10: context parallelism: this rank's position in TRIAX_GROUP_CP. Each cp rank holds
   * two chunks of every sequence, cp_rank and 2 * cp_size - 1 - cp_rank of 2 * cp_size (which
   * balances causal attention); stage_io.position_ids then gives every token's position. */
  int32_t cp_rank, cp_size;
  /* since 1.10: optimizer.zero_stage. At 3 the model's parameters are dp shards
   * (TRIAX_PARAM_ZERO3_SHARD), gathered around each use and freed after. */
  int32_t zero_stage;
  /* since 1.10: the config's `fp8` section as YAML (which linears compute in fp8 and how they are
   * scaled), or NULL when the run trains without fp8. */
  const char* fp8_yaml;
  /* since 1.11: parallelism.context_parallel_attention, meaningful where cp_size > 1: 0 = the
   * K/V all-gathered over TRIAX_GROUP_CP, 1 = ring attention (K/V blocks passed around the cp
   * ring with start_send_recv while each block is attended, partial softmaxes merged) */
  int32_t cp_ring_attention;
  /* since 1.11: parallelism.moe_layer_recompute: a model's mixture-of-experts blocks (router,
   * dispatch, experts) keep only their input and run again in backward. Models without them ignore it. */
  int32_t recompute_moe_layers;
} triax_model_context;

/* Since 1.13: a weight-gradient product that a model's backward deferred (zero-bubble pipeline
 * schedules split each backward into B, the input gradients, and W, the weight gradients). run
 * computes the gradient and accumulates it into the weights, as the backward would have; release
 * frees the work, run or not. Whoever holds it calls run at most once, then release once. */
typedef struct triax_deferred_work {
  void* self;
  triax_status (*run)(void* self, triax_error* error);
  void (*release)(void* self);
} triax_deferred_work;

/* Since 1.13: where a model puts the work it defers during the backward of one micro-batch through
 * one stage; defer takes ownership of the work (possibly called from autograd's device threads). */
typedef struct triax_weight_gradient_queue {
  void* self;
  void (*defer)(void* self, triax_deferred_work work);
} triax_weight_gradient_queue;

/*
 * One micro-batch through one pipeline stage. The host fills the inputs, the model the outputs.
 * input_ids and positions are given on every stage (a later stage needs positions for RoPE);
 * label_ids/label_mask matter on the last stage; hidden_in is the previous stage's hidden_out.
 */
typedef struct triax_stage_io {
  size_t struct_size;
  triax_tensor* input_ids;  /* [batch, seq] int64 */
  triax_tensor* label_ids;  /* [batch, seq] int64 */
  triax_tensor* label_mask; /* [batch, seq] float, 1 = counts in the loss; may be NULL (all count) */
  triax_tensor* hidden_in;  /* NULL on the first stage */
  /* outputs (new references) */
  triax_tensor* hidden_out; /* set on every stage but the last */
  triax_tensor* loss;       /* last stage: scalar fp32 mean cross-entropy over counted tokens */
  triax_tensor* aux_loss;   /* optional scalar added to loss for backward (MoE balance); logged */
  /* since 1.2 (read and written only when struct_size covers them) */
  int32_t want_logits;  /* input: the last stage also returns its logits */
  triax_tensor* logits; /* output: [batch, seq, padded vocab / tp], this tp rank's vocabulary shard */
  /* since 1.3: a pipeline boundary may carry several tensors (a residual kept in fp32 beside the
   * hidden state). boundary_in[0] is hidden_in and boundary_out[0] is hidden_out: a model that
   * sends one tensor may use either spelling. Unused entries are NULL. */
  int32_t boundary_in_count;
  triax_tensor* boundary_in[TRIAX_MAX_BOUNDARY_TENSORS];
  int32_t boundary_out_count; /* output */
  triax_tensor* boundary_out[TRIAX_MAX_BOUNDARY_TENSORS];
  /* since 1.3, outputs: this stage's auxiliary losses of this micro-batch (already weighted by
   * their coefficients, added to the objective for backward), indexed as the model's
   * aux_loss_names; NULL where this stage has none. aux_loss (above) is then left NULL. */
  triax_tensor* aux_losses[TRIAX_MAX_AUX_LOSSES];
  /* since 1.9, input of forward_cached: nonzero when the host allows the model to run a decoding
   * step (one new token per row) as a CUDA graph, replayed while the same caches come back in the
   * same order (the host changes nothing on the device between those steps but the inputs) */
  int32_t cuda_graph;
  /* since 1.9, input: [batch, seq] int64, each token's position inside its document, restarting
   * at 0 where a document starts (model_config._use_doc_masking); given on every pipeline stage,
   * like input_ids. NULL: positions 0..seq-1, each row one document. A model built before 1.9
   * never reads it; a host hands it only to an engine whose struct_size covers it. */
  triax_tensor* position_ids;
  /* since 1.13, input of forward: non-NULL asks the model to defer the weight-gradient products of
   * its linear layers in this micro-batch's backward into the queue (the engine runs them later:
   * W); NULL, or a model built before 1.13, computes every gradient in the backward. A model may
   * defer some products and not others: what it does not defer it computes in the backward. */
  const triax_weight_gradient_queue* weight_gradients;
} triax_stage_io;

enum {
  TRIAX_PARAM_NO_WEIGHT_DECAY = 1u << 0, /* the model asks for no weight decay (config may add more) */
  TRIAX_PARAM_TP_REPLICATED = 1u << 1,   /* identical on every tp rank (norm weights, ...) */
  TRIAX_PARAM_TIED = 1u << 2,            /* one logical parameter held by several pipeline stages */
  /* since 1.10 (model_context.zero_stage 3): tensor is 1-D, this rank's ZeRO shard
   * (triax/zero_partition.hpp, over the parameter's gradient group) of the flattened tp shard that
   * global_shape and shard_offset describe; its gradient arrives likewise sharded. */
  TRIAX_PARAM_ZERO3_SHARD = 1u << 3
};

typedef struct triax_parameter_info {
  size_t struct_size;
  const char* name;     /* stable, unique within the model: "model.layers.0.self_attn.o_proj.weight" */
  triax_tensor* tensor; /* new reference to the live parameter (this rank's shard) */
  int32_t ndim;
  int64_t global_shape[TRIAX_MAX_TENSOR_DIMS]; /* shape of the whole, unsharded parameter */
  int64_t shard_offset[TRIAX_MAX_TENSOR_DIMS]; /* where this rank's shard starts in it */
  uint32_t flags;                              /* TRIAX_PARAM_* */
  const char* tied_key;                        /* with TRIAX_PARAM_TIED: the same key on every stage holding it */
  /* since 1.2: the meaningful extent of the whole parameter. Elements beyond it (rows of a
   * vocabulary padded to a multiple of tp) are padding, which checkpoints and exports leave out,
   * so that a checkpoint loads at another tp. All zero means global_shape. */
  int64_t unpadded_shape[TRIAX_MAX_TENSOR_DIMS];
  /* since 1.3: the group this parameter's gradient is reduced over: TRIAX_GROUP_DP (dense) or
   * TRIAX_GROUP_EDP (expert shards, sharded over TRIAX_GROUP_EP by global_shape/shard_offset;
   * their gradient arrives summed over ep, so the host sums over edp and divides by dp). The
   * group's ranks hold identical copies, its replica set: its rank 0 counts the copy in the
   * gradient norm and saves it. 0, or a struct too short to hold it, means TRIAX_GROUP_DP. */
  int32_t gradient_group;
  double lr_scale; /* since 1.5: factor on its learning rate (spectral muP), > 0; too short: 1 */
} triax_parameter_info;

typedef struct triax_model_vtable {
  size_t struct_size;
  /* Cost of each of the model's pipeline blocks in forward FLOPs per token, before any instance
   * exists: the host balances blocks over pipeline ranks with it. costs may be NULL to ask
   * for the count only. */
  triax_status (*describe_blocks)(const char* model_config_yaml, int64_t sequence_length, double* costs,
                                  int32_t capacity, int32_t* count, triax_error* error);
  triax_status (*create)(const char* model_config_yaml, const triax_model_context* context, triax_model** out,
                         triax_error* error);
  void (*destroy)(triax_model* model);
  triax_status (*forward)(triax_model* model, triax_stage_io* io, triax_error* error);
  int64_t (*parameter_count)(triax_model* model);
  triax_status (*parameter_info)(triax_model* model, int64_t index, triax_parameter_info* out, triax_error* error);
  /* Training FLOPs (forward + backward) per token of the whole model, for MFU. */
  double (*flops_per_token)(triax_model* model, int64_t sequence_length);
  /* Number of parameters of the whole, unsharded model (for logs and MFU). */
  int64_t (*total_parameters)(triax_model* model);
  triax_status (*set_training)(triax_model* model, int32_t training, triax_error* error);
  /* model_config with every default filled in, as YAML; valid until destroy. */
  const char* (*resolved_config)(triax_model* model);

  /* ---- since 1.3, each read only when struct_size covers it; NULL = not provided ---- */
  /* The key whose presence in a nanotron model_config selects this plugin when model.plugin is
   * absent ("is_llama_config"), and optionally a second key that must be present too
   * ("moe_config" beside "is_qwen2_config"). */
  const char* nanotron_marker;
  const char* nanotron_marker_requires;
  /* One line naming the formula behind flops_per_token, for the MFU log line. */
  const char* flops_formula;
  /* The vocabulary the data loader draws from and checks token files against. */
  triax_status (*vocab_size)(const char* model_config_yaml, int64_t* out, triax_error* error);
  /* Hugging Face interop (triax convert, model.init_method.path); NULL: none. */
  const struct triax_model_hf_vtable* hf;
  /* Names of the model's auxiliary losses ("load_balance", "router_z"), the same on every pipeline
   * stage and chunk: writes at most capacity of them (static strings) and returns the count. */
  int32_t (*aux_loss_names)(triax_model* model, const char** names, int32_t capacity);
  /* Inference with a cache (generation). A cache holds one sequence's state on this stage (K/V
   * of attention, conv and SSM state of Mamba) for up to max_tokens tokens. */
  triax_status (*cache_create)(triax_model* model, int64_t max_tokens, triax_cache** out, triax_error* error);
  void (*cache_destroy)(triax_model* model, triax_cache* cache);
  int64_t (*cache_length)(triax_model* model, const triax_cache* cache); /* tokens seen so far */
  /* Forward of new tokens, no gradients: row i of io->input_ids ([count, new], on every stage)
   * continues caches[i], at positions cache_length..cache_length + new - 1, and extends it. A
   * stage without the embedding takes io->hidden_in / boundary_in; a stage without the head sets
   * hidden_out / boundary_out; the last stage sets io->logits ([count, new, padded vocab / tp]). */
  triax_status (*forward_cached)(triax_model* model, triax_cache* const* caches, int32_t count, triax_stage_io* io,
                                 triax_error* error);
  uint32_t capabilities; /* since 1.5: TRIAX_MODEL_* bits of what it supports (0 when too short) */
  /* since 1.12, QK-clip (an optimizer's qk_clip_threshold, MuonClip); NULL = not supported. With
   * `enable` nonzero the model's attention layers keep, over the training forwards, the largest
   * pre-softmax logit of each of this rank's query heads. */
  triax_status (*track_attention_logits)(triax_model* model, int32_t enable, triax_error* error);
  /* The factors that bring each head whose largest logit (over the data-parallel replicas, since
   * the last call) exceeds `threshold` back to it, then the maxima start again: for each parameter
   * holding query or key rows of this rank's heads, its index (as parameter_info numbers it) in
   * indices[k] and a new reference to a tensor broadcastable to it in factors[k], k < *count
   * (at most capacity). Called by every rank of the data-parallel group alike. */
  triax_status (*qk_clip_factors)(triax_model* model, double threshold, int64_t* indices, triax_tensor** factors,
                                  int32_t capacity, int32_t* count, triax_error* error);
} triax_model_vtable;

enum {
  TRIAX_MODEL_SPECTRAL_MUP = 1u << 0, /* model.init_method.use_mup: spectral muP init and lr_scale */
  /* since 1.7: parallelism.recompute_mlp_activation (triax_model_context.recompute_mlp_activation) */
  TRIAX_MODEL_RECOMPUTE_MLP_ACTIVATION = 1u << 1
};

#include "abi_hf.h" /* the Hugging Face mapping of a model (since 1.3) */

#include "abi_engine.h" /* pipeline engines: chunks, micro-batches, the step request */

#include "abi_optimizer.h" /* optimizer plugins: parameters, gradient sharding, state */

/* ---- plugin manifest -------------------------------------------------------------------- */

typedef enum triax_plugin_kind {
  TRIAX_PLUGIN_MODEL = 1,
  TRIAX_PLUGIN_ENGINE = 2,
  TRIAX_PLUGIN_OPTIMIZER = 3
} triax_plugin_kind;

typedef struct triax_plugin_descriptor {
  triax_plugin_kind kind;
  const char* name;        /* selected by this name in YAML */
  const char* version;     /* the plugin's own version, "1.0.0" */
  const char* description; /* one line */
  /* triax_model_vtable / triax_engine_vtable / triax_optimizer_vtable, by kind */
  const void* vtable;
} triax_plugin_descriptor;

typedef struct triax_plugin_manifest {
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* torch_version; /* "2.11.0": the LibTorch the library was compiled against */
  int32_t cxx11_abi;         /* the value of _GLIBCXX_USE_CXX11_ABI it was compiled with */
  int32_t plugin_count;
  const triax_plugin_descriptor* plugins;
} triax_plugin_manifest;

typedef const triax_plugin_manifest* (*triax_plugin_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TRIAX_ABI_H */
