/*
 * Model plugins that only describe themselves, for choosing a model plugin without model.plugin:
 * marker_a declares the nanotron marker is_a_config, marker_b is_b_config together with
 * b_extra_config, and abi_1_2_model has a table that ends where ABI 1.2's did (no marker). None
 * has a Hugging Face mapping. Nothing can be built from them: create refuses. Plain C, no SDK.
 */
#include <stddef.h>
#include <string.h>
#include <torch/headeronly/version.h>

#include "triax/abi.h"

static triax_status describe_blocks(const char* yaml, int64_t sequence_length, double* costs, int32_t capacity,
                                    int32_t* count, triax_error* error) {
  (void)yaml, (void)sequence_length, (void)costs, (void)capacity, (void)error;
  *count = 0;
  return TRIAX_OK;
}
static triax_status create(const char* yaml, const triax_model_context* context, triax_model** out,
                           triax_error* error) {
  (void)yaml, (void)context;
  *out = 0;
  strcpy(error->message, "a test model that describes itself only");
  return TRIAX_ERROR_UNSUPPORTED;
}
static void destroy(triax_model* model) { (void)model; }
static triax_status forward(triax_model* model, triax_stage_io* io, triax_error* error) {
  (void)model, (void)io, (void)error;
  return TRIAX_ERROR_UNSUPPORTED;
}
static int64_t parameter_count(triax_model* model) {
  (void)model;
  return 0;
}
static triax_status parameter_info(triax_model* model, int64_t index, triax_parameter_info* out, triax_error* error) {
  (void)model, (void)index, (void)out, (void)error;
  return TRIAX_ERROR_UNSUPPORTED;
}
static double flops_per_token(triax_model* model, int64_t sequence_length) {
  (void)model, (void)sequence_length;
  return 0.0;
}
static int64_t total_parameters(triax_model* model) {
  (void)model;
  return 0;
}
static triax_status set_training(triax_model* model, int32_t training, triax_error* error) {
  (void)model, (void)training, (void)error;
  return TRIAX_OK;
}
static const char* resolved_config(triax_model* model) {
  (void)model;
  return "";
}

/* Every member not named is NULL (0): no vocabulary, no Hugging Face mapping, no cache. */
#define BASE_MEMBERS                                                                                          \
  .describe_blocks = describe_blocks, .create = create, .destroy = destroy, .forward = forward,              \
  .parameter_count = parameter_count, .parameter_info = parameter_info, .flops_per_token = flops_per_token, \
  .total_parameters = total_parameters, .set_training = set_training, .resolved_config = resolved_config

static const triax_model_vtable marker_a = {.struct_size = sizeof(triax_model_vtable), BASE_MEMBERS,
                                            .nanotron_marker = "is_a_config", .flops_formula = "a formula"};
static const triax_model_vtable marker_b = {.struct_size = sizeof(triax_model_vtable), BASE_MEMBERS,
                                            .nanotron_marker = "is_b_config",
                                            .nanotron_marker_requires = "b_extra_config"};
/* ABI 1.2: the table ends before nanotron_marker; what follows must never be read. */
static const triax_model_vtable abi_1_2 = {.struct_size = offsetof(triax_model_vtable, nanotron_marker), BASE_MEMBERS,
                                           .nanotron_marker = "never_read_marker"};

static const triax_plugin_descriptor descriptors[] = {
    {TRIAX_PLUGIN_MODEL, "marker_a", "1.0.0", "declares is_a_config", &marker_a},
    {TRIAX_PLUGIN_MODEL, "marker_b", "1.0.0", "declares is_b_config with b_extra_config", &marker_b},
    {TRIAX_PLUGIN_MODEL, "abi_1_2_model", "1.0.0", "a model table of ABI 1.2", &abi_1_2}};

static const triax_plugin_manifest manifest = {TRIAX_ABI_VERSION_MAJOR, TRIAX_ABI_VERSION_MINOR, TORCH_VERSION, 1,
                                               3, descriptors};

TRIAX_PLUGIN_EXPORT const triax_plugin_manifest* triax_plugin_entry(void) { return &manifest; }
