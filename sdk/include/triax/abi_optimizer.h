/*
 * triax plugin ABI, part 4: optimizer plugins (their parameters, gradient sharding and state).
 * Included by triax/abi.h, which defines the types used here; include that header, not this.
 */
#ifndef TRIAX_ABI_OPTIMIZER_H
#define TRIAX_ABI_OPTIMIZER_H

typedef struct triax_optimizer_param {
  const char* name;
  triax_tensor* param; /* borrowed at create; the optimizer keeps its own reference */
  double weight_decay; /* already resolved: 0 for excluded parameters */
  uint32_t flags;      /* TRIAX_PARAM_* */
} triax_optimizer_param;

/* Since 1.12: where a parameter's tensor sits in the whole parameter, as the model declared it
 * (triax_parameter_info's ndim, global_shape and shard_offset). */
typedef struct triax_parameter_layout {
  int32_t ndim;
  int64_t global_shape[TRIAX_MAX_TENSOR_DIMS];
  int64_t shard_offset[TRIAX_MAX_TENSOR_DIMS];
} triax_parameter_layout;

typedef struct triax_optimizer_context {
  size_t struct_size;
  int32_t dp_rank, dp_size;
  const char* optimizer_yaml; /* the whole `optimizer` section */
  const triax_host* host;
  /* since 1.3: per parameter (as numbered at create), the group its gradient is averaged over
   * (triax_parameter_info.gradient_group, never 0), over which a ZeRO optimizer shards it. */
  const int32_t* gradient_groups;
  const double* lr_scales; /* since 1.5: per parameter, triax_parameter_info.lr_scale; NULL = all 1 */
  /* since 1.12: per parameter, its layout in the whole parameter, for an optimizer that works on
   * whole matrices (muon gathers the tensor-parallel shards with it); NULL = every tensor whole. */
  const triax_parameter_layout* layouts;
} triax_optimizer_context;

/* How an optimizer receives gradients (triax_optimizer_vtable.gradient_sharding, ABI 1.1). */
typedef enum triax_gradient_sharding {
  /* step() gets each parameter's whole gradient, averaged over the dp group. */
  TRIAX_GRADIENTS_WHOLE = 0,
  /* ZeRO: step() gets this dp rank's shard of each dp-averaged gradient (1-D) and all-gathers
   * the parameters over TRIAX_GROUP_DP after its update. Parameter of n elements, dp rank r of D:
   * elements [r*c, min((r+1)*c, n)), c = ceil(n / D), of the flattened parameter (empty when
   * r*c >= n); triax/zero_partition.hpp spells this out for C++. */
  TRIAX_GRADIENTS_DP_SHARDED = 1,
  /* since 1.10, ZeRO-3: the parameters themselves are the model's shards
   * (TRIAX_PARAM_ZERO3_SHARD); step() gets each one's gradient shard and updates it in place, with
   * nothing to gather after. */
  TRIAX_GRADIENTS_PARAMETERS_SHARDED = 2
} triax_gradient_sharding;

/* Kinds of optimizer state (triax_optimizer_state.kind, ABI 1.2). */
typedef enum triax_optimizer_state_kind {
  /* A 1-D fp32 tensor covering elements [element_offset, element_offset + numel) of the flattened
   * parameter (this rank's tensor-parallel shard of it, row-major): moments, master weights. */
  TRIAX_STATE_ELEMENTWISE = 0,
  /* One value per parameter, equal on every rank that holds any of it: step counters. */
  TRIAX_STATE_PER_PARAMETER = 1
} triax_optimizer_state_kind;

/* One tensor of an optimizer's state, as the checkpoint store sees it (ABI 1.2). */
typedef struct triax_optimizer_state {
  size_t struct_size;
  int64_t param_index;    /* which parameter, as numbered at create */
  const char* name;       /* stable within the optimizer: "exp_avg", "exp_avg_sq", "master", "step" */
  triax_tensor* tensor;   /* new reference to the live state tensor: read to save, copied into to load */
  int64_t element_offset; /* TRIAX_STATE_ELEMENTWISE: first element of the parameter it covers */
  int32_t kind;           /* a triax_optimizer_state_kind */
} triax_optimizer_state;

typedef struct triax_optimizer_vtable {
  size_t struct_size;
  triax_status (*create)(const triax_optimizer_context* context, const triax_optimizer_param* params, int64_t count,
                         triax_optimizer** out, triax_error* error);
  void (*destroy)(triax_optimizer* optimizer);
  /* One update. grads[i] (borrowed, fp32, reduced and clipped) belongs to params[i]: the whole
   * gradient, or this dp rank's shard of it (see gradient_sharding). */
  triax_status (*step)(triax_optimizer* optimizer, triax_tensor* const* grads, int64_t count, double learning_rate,
                       triax_error* error);
  int64_t (*state_bytes)(triax_optimizer* optimizer); /* bytes of state (masters, moments) on this rank */
  /* ---- ABI 1.1: read only when struct_size covers it; a 1.0 table means WHOLE ---- */
  int32_t gradient_sharding; /* a triax_gradient_sharding value */
  /* ---- ABI 1.2: checkpointing. A table without them saves and loads no optimizer state ---- */
  int64_t (*state_count)(triax_optimizer* optimizer);
  triax_status (*state_entry)(triax_optimizer* optimizer, int64_t index, triax_optimizer_state* out,
                              triax_error* error);
  /* After the host copied loaded values into the state tensors: refresh what derives from them. */
  triax_status (*state_loaded)(triax_optimizer* optimizer, triax_error* error);
  /* ---- ABI 1.8: read only when struct_size covers it; NULL = the host calls step() ---- */
  /* One update, as step() but: grads[i] is fp32 or, when the step had one micro-batch and nothing
   * to sum in fp32, params[i]'s own dtype (the backward's gradient as it is); clipping is not
   * applied to them: grad_scale (borrowed, NULL = 1) is a 0-dim fp32 tensor on the gradients'
   * device, the clipping coefficient, that each gradient is multiplied by in fp32 before the
   * update. The step may overwrite grads (the host reads them no more this step). */
  triax_status (*step_scaled)(triax_optimizer* optimizer, triax_tensor* const* grads, int64_t count,
                              double learning_rate, triax_tensor* grad_scale, triax_error* error);
  /* ---- ABI 1.12: read only when struct_size covers it; NULL = not provided ---- */
  /* optimizer_factory with every default filled in, as YAML (valid until destroy; NULL or empty:
   * the section as given): the run folder's config.yaml shows it. */
  const char* (*resolved_config)(triax_optimizer* optimizer);
  /* QK-clip: the optimizer's threshold on attention logits, or 0 when off (NULL: off). When on, the
   * host has the model track its attention logits and after every step hands the model's factors
   * (triax_model_vtable.qk_clip_factors) to scale_parameters. */
  double (*qk_clip_threshold)(triax_optimizer* optimizer);
  /* Multiplies parameter indices[k] (numbered as at create) by factors[k] (borrowed, broadcastable
   * to the whole parameter), and with it whatever the optimizer keeps of its values (masters). */
  triax_status (*scale_parameters)(triax_optimizer* optimizer, const int64_t* indices, triax_tensor* const* factors,
                                   int64_t count, triax_error* error);
} triax_optimizer_vtable;

#endif /* TRIAX_ABI_OPTIMIZER_H */
