/*
 * triax plugin ABI, part 2: how a model's parameters map to Hugging Face tensors (since 1.3).
 * Included by triax/abi.h, which defines the types used here; include that header, not this.
 */
#ifndef TRIAX_ABI_HF_H
#define TRIAX_ABI_HF_H

/* How one model parameter (whole and unpadded, as checkpoints hold it) maps to HF tensors. */
typedef enum triax_hf_rule_kind {
  TRIAX_HF_RENAME = 0, /* one HF tensor, the same values under another (or the same) name */
  TRIAX_HF_CONCAT = 1, /* the HF tensors concatenated along `dim` (fused q/k/v, gate/up) */
  TRIAX_HF_STACK = 2,  /* the HF tensors stacked along a new dimension `dim` (E experts) */
  TRIAX_HF_IGNORE = 3, /* no parameter: HF tensors matching hf_names ('*' = any run) are skipped */
  TRIAX_HF_FLATTEN = 4, /* since 1.4: one HF tensor, the parameter with dims `dim`, `dim` + 1 merged */
  /* since 1.5: as CONCAT along `dim` >= 1, HF tensor i being part i with dims 0..dim merged: q/k/v
   * grouped by key/value head, [kv_heads, (group + 2) x head_dim, hidden], dim 1. A name repeated
   * in consecutive places is one HF tensor holding those parts one after another along its dim 0
   * (Mamba-2's in_proj: z, x, B, C, dt rows, grouped by head group in the parameter); a host older
   * than this reading refuses such a rule (a tensor claimed twice) */
  TRIAX_HF_INTERLEAVE = 5
} triax_hf_rule_kind;

typedef struct triax_hf_tensor_rule {
  size_t struct_size;
  int32_t kind;               /* a triax_hf_rule_kind */
  const char* triax_name;     /* the parameter's name; NULL for TRIAX_HF_IGNORE */
  int32_t ndim;               /* the parameter's whole, meaningful shape */
  const int64_t* shape;
  int32_t dim;                /* TRIAX_HF_CONCAT / STACK / FLATTEN / INTERLEAVE */
  int32_t hf_count;           /* HF tensors, in order */
  const char* const* hf_names;
  const int64_t* hf_sizes;    /* TRIAX_HF_CONCAT / INTERLEAVE: each HF part's extent along dim */
  int32_t optional;           /* reading: the HF tensors may all be absent, or equal another
                                 rule's (a tied lm_head.weight): then nothing is read here */
} triax_hf_tensor_rule;

/* Receives rules one by one; the host copies what it needs during the call. */
typedef struct triax_hf_rule_sink {
  void* self;
  triax_status (*add)(void* self, const triax_hf_tensor_rule* rule, triax_error* error);
} triax_hf_rule_sink;

typedef struct triax_model_hf_vtable {
  size_t struct_size;
  /* config.json "architectures" this plugin reads; the first is the one it writes. */
  int32_t architecture_count;
  const char* const* architectures;
  /* config.json (text) -> model.model_config (YAML). Refuses, naming the key, what the plugin
   * cannot represent. */
  triax_status (*config_from_hf)(const char* config_json, const triax_text_sink* model_config_yaml,
                                 triax_error* error);
  /* model.model_config -> config.json for weights of `dtype` ("float32", "bfloat16", ...), and
   * generation_config.json. */
  triax_status (*config_to_hf)(const char* model_config_yaml, const char* dtype, const triax_text_sink* config_json,
                               const triax_text_sink* generation_config_json, triax_error* error);
  /* Every rule of the model described by model_config, parameters in model order. */
  triax_status (*tensor_map)(const char* model_config_yaml, const triax_hf_rule_sink* sink, triax_error* error);
} triax_model_hf_vtable;

#endif /* TRIAX_ABI_HF_H */
