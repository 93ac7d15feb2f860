/*
 * An optimizer library as a plugin built against ABI 1.0 would ship it: its vtable ends at
 * state_bytes (no gradient_sharding member yet) and its manifest says minor version 0. The
 * loader must accept it and treat it as taking whole gradients. Plain C, no SDK, no LibTorch
 * beyond its version header.
 */
#include <torch/headeronly/version.h>

#include "triax/abi.h"

/* triax_optimizer_vtable as ABI 1.0 declared it. */
typedef struct optimizer_vtable_1_0 {
  size_t struct_size;
  triax_status (*create)(const triax_optimizer_context* context, const triax_optimizer_param* params, int64_t count,
                         triax_optimizer** out, triax_error* error);
  void (*destroy)(triax_optimizer* optimizer);
  triax_status (*step)(triax_optimizer* optimizer, triax_tensor* const* grads, int64_t count, double learning_rate,
                       triax_error* error);
  int64_t (*state_bytes)(triax_optimizer* optimizer);
} optimizer_vtable_1_0;

static triax_status old_create(const triax_optimizer_context* context, const triax_optimizer_param* params,
                               int64_t count, triax_optimizer** out, triax_error* error) {
  (void)context, (void)params, (void)count, (void)error;
  *out = 0;
  return TRIAX_ERROR_UNSUPPORTED;
}
static void old_destroy(triax_optimizer* optimizer) { (void)optimizer; }
static triax_status old_step(triax_optimizer* optimizer, triax_tensor* const* grads, int64_t count,
                             double learning_rate, triax_error* error) {
  (void)optimizer, (void)grads, (void)count, (void)learning_rate, (void)error;
  return TRIAX_ERROR_UNSUPPORTED;
}
static int64_t old_state_bytes(triax_optimizer* optimizer) {
  (void)optimizer;
  return 0;
}

static const optimizer_vtable_1_0 vtable = {sizeof(optimizer_vtable_1_0), old_create, old_destroy, old_step,
                                            old_state_bytes};

static const triax_plugin_descriptor descriptors[] = {
    {TRIAX_PLUGIN_OPTIMIZER, "abi_1_0_optimizer", "1.0.0", "an optimizer built against ABI 1.0", &vtable}};

static const triax_plugin_manifest manifest = {TRIAX_ABI_VERSION_MAJOR, 0, TORCH_VERSION, 1, 1, descriptors};

TRIAX_PLUGIN_EXPORT const triax_plugin_manifest* triax_plugin_entry(void) { return &manifest; }
