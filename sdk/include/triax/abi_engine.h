/*
 * triax plugin ABI, part 3: pipeline engines (the models' chunks they drive, the micro-batches,
 * the step request and its result, the engine's vtable).
 * Included by triax/abi.h, which defines the types used here; include that header, not this.
 */
#ifndef TRIAX_ABI_ENGINE_H
#define TRIAX_ABI_ENGINE_H

/* ---- pipeline engines --------------------------------------------------------------------- */

typedef struct triax_model_ref {
  const triax_model_vtable* vtable;
  triax_model* model;
} triax_model_ref;

/* Hands the engine micro-batches: fills input_ids, label_ids, label_mask of io with new references. */
typedef struct triax_micro_batch_source {
  void* self;
  triax_status (*next)(void* self, int32_t micro_batch_index, triax_stage_io* io, triax_error* error);
} triax_micro_batch_source;

/* since 1.13: where an engine's model chunks sit among the pp_size x chunks virtual stages
 * (triax_engine_vtable.chunk_placement) */
typedef enum triax_chunk_placement {
  /* chunk c of pipeline rank r is virtual stage c * pp_size + r (Megatron's virtual pipeline) */
  TRIAX_CHUNKS_INTERLEAVED = 0,
  /* even chunks as interleaved, odd chunks back up the ranks: c * pp_size + pp_size - 1 - r. With
   * two chunks a V: rank 0 holds the first and the last virtual stage, the last rank the middle two */
  TRIAX_CHUNKS_V = 1
} triax_chunk_placement;

typedef struct triax_engine_context {
  size_t struct_size;
  int32_t pp_rank, pp_size;
  const char* parallelism_yaml; /* the whole `parallelism` section */
  const triax_host* host;
  /* since 1.1: micro-batches per optimizer step (tokens.batch_accumulation_per_replica), so a
   * schedule can refuse an impossible count before training starts */
  int32_t micro_batches;
  /* since 1.13: nonzero when the host places the engine's chunks as its chunk_placement says (an
   * older host places them interleaved) */
  int32_t places_chunks;
  /* since 1.15: nonzero when the host's sends over TRIAX_GROUP_PP return at once and complete in
   * the background without waiting for their receiver (the mpi backend's), so that an engine may
   * send each tensor as soon as it is made; zero (the nccl backend, or an older host) when a send
   * may wait for its receive, so that the sends must meet their receives in order */
  int32_t sends_buffered;
} triax_engine_context;

/* since 1.14: what an engine's step timed for the host's record of pipeline passes
 * (triax_step_request.pass_timed): a pass of one micro-batch through one chunk, or a transfer */
typedef enum triax_pass_kind {
  TRIAX_PASS_FORWARD = 0,
  TRIAX_PASS_BACKWARD = 1,        /* the whole backward */
  TRIAX_PASS_BACKWARD_INPUT = 2,  /* B: the gradients of the inputs (split backward) */
  TRIAX_PASS_BACKWARD_WEIGHT = 3, /* W: the weights' gradients (split backward) */
  TRIAX_PASS_RECEIVE_INPUT = 4,
  TRIAX_PASS_SEND_OUTPUT = 5,
  TRIAX_PASS_RECEIVE_GRADIENT = 6,
  TRIAX_PASS_SEND_GRADIENT = 7
} triax_pass_kind;

typedef struct triax_step_request {
  size_t struct_size;
  triax_model_ref model;
  int32_t micro_batches;
  triax_micro_batch_source batches;
  /* Called after the backward of each micro-batch on this rank, in order: the host folds the
   * gradients into its fp32 accumulators and may start data-parallel reductions. An engine that
   * has the weight gradients deferred (triax_stage_io.weight_gradients) calls it once the
   * micro-batch's deferred work has run, so that the gradients are complete. */
  void* hooks_self;
  triax_status (*after_backward)(void* hooks_self, int32_t micro_batch_index, triax_error* error);
  /* since 1.3: every model chunk of this rank (see triax_engine_vtable.model_chunks), in chunk
   * order; models[0] equals `model`. After the backward of a micro-batch through one chunk the
   * engine calls after_chunk_backward (an engine with one chunk may call after_backward instead). */
  int32_t model_count;
  const triax_model_ref* models;
  triax_status (*after_chunk_backward)(void* hooks_self, int32_t chunk, int32_t micro_batch_index,
                                       triax_error* error);
  /* since 1.14: NULL unless the host records the step's passes (parallelism.pp_pass_record). Then
   * the engine calls it as each pass or transfer (a triax_pass_kind) ends, with its wall time in
   * seconds, the device's work waited for; the host notes when it ended. */
  void (*pass_timed)(void* hooks_self, int32_t kind, int32_t chunk, int32_t micro_batch_index, double seconds);
} triax_step_request;

typedef struct triax_step_result {
  size_t struct_size;
  triax_tensor* loss;              /* new ref: mean LM loss over the micro-batches (last stage; else NULL) */
  triax_tensor* aux_loss;          /* new ref or NULL: mean auxiliary loss */
  int32_t peak_live_micro_batches; /* most micro-batches whose activations were alive at once */
  /* since 1.3: the mean over micro-batches of this rank's named auxiliary losses (summed over its
   * chunks), indexed as the model's aux_loss_names; NULL where none. */
  triax_tensor* aux_losses[TRIAX_MAX_AUX_LOSSES];
} triax_step_result;

typedef struct triax_engine_vtable {
  size_t struct_size;
  triax_status (*create)(const triax_engine_context* context, triax_engine** out, triax_error* error);
  void (*destroy)(triax_engine* engine);
  /* Runs forward and backward of every micro-batch of one optimizer step. The host has zeroed
   * the gradients before and steps the optimizer after. */
  triax_status (*train_step)(triax_engine* engine, const triax_step_request* request, triax_step_result* result,
                             triax_error* error);
  /* since 1.3 (NULL or not covered by struct_size = 1): model chunks wanted per pipeline rank
   * (interleaved schedules), asked once after create: the host cuts the blocks into pp_size x
   * chunks virtual stages and passes every chunk in each triax_step_request. */
  int32_t (*model_chunks)(triax_engine* engine);
  /* since 1.13 (NULL or not covered by struct_size: TRIAX_CHUNKS_INTERLEAVED): where the chunks sit,
   * a triax_chunk_placement, asked once after create */
  int32_t (*chunk_placement)(triax_engine* engine);
} triax_engine_vtable;

#endif /* TRIAX_ABI_ENGINE_H */
