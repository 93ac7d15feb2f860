/*
 * Hand-written plugin libraries the loader must refuse, one per case. Plain C, no SDK and no
 * LibTorch: the manifest is spelled out as a plugin without the registration macro would.
 * tests/plugins.cmake builds this file once per case, selected by one of:
 *
 *   BROKEN_WRONG_ABI       abi_major one above the core's
 *   BROKEN_MISSING_ENTRY   exports a function, but not triax_plugin_entry
 *   BROKEN_WRONG_TORCH     built "against LibTorch 1.0.0"
 *   BROKEN_WRONG_CXX_ABI   built with the old libstdc++ ABI (_GLIBCXX_USE_CXX11_ABI=0)
 *   BROKEN_NULL_VTABLE     an optimizer descriptor without a vtable
 *   BROKEN_UNKNOWN_KIND    a descriptor of kind 7
 *   BROKEN_BAD_SHARDING    an optimizer declaring gradient_sharding 7 (ABI 1.1 member)
 */
#include <torch/headeronly/version.h> /* plain #defines: TORCH_VERSION is "major.minor.patch" */

#include "triax/abi.h"

/* What a well-formed manifest carries, unless the case below says otherwise. */
#define GOOD_TORCH_VERSION TORCH_VERSION
#define GOOD_CXX11_ABI 1 /* LibTorch 2.x wheels, and so triax, use the new libstdc++ ABI */

static triax_status stub_create(const triax_optimizer_context* context, const triax_optimizer_param* params,
                                int64_t count, triax_optimizer** out, triax_error* error) {
  (void)context, (void)params, (void)count, (void)error;
  *out = 0;
  return TRIAX_ERROR_UNSUPPORTED;
}
static void stub_destroy(triax_optimizer* optimizer) { (void)optimizer; }
static triax_status stub_step(triax_optimizer* optimizer, triax_tensor* const* grads, int64_t count,
                              double learning_rate, triax_error* error) {
  (void)optimizer, (void)grads, (void)count, (void)learning_rate, (void)error;
  return TRIAX_ERROR_UNSUPPORTED;
}
static int64_t stub_state_bytes(triax_optimizer* optimizer) {
  (void)optimizer;
  return 0;
}

#if defined(BROKEN_BAD_SHARDING)
#define GRADIENT_SHARDING 7
#else
#define GRADIENT_SHARDING TRIAX_GRADIENTS_WHOLE
#endif

/* unused in the variant without an entry symbol */
static const triax_optimizer_vtable stub_vtable __attribute__((unused)) = {
    .struct_size = sizeof(triax_optimizer_vtable),
    .create = stub_create,
    .destroy = stub_destroy,
    .step = stub_step,
    .state_bytes = stub_state_bytes,
    .gradient_sharding = GRADIENT_SHARDING}; /* no checkpointing, no step_scaled: NULL */

#if defined(BROKEN_WRONG_ABI)
#define ABI_MAJOR (TRIAX_ABI_VERSION_MAJOR + 1)
#else
#define ABI_MAJOR TRIAX_ABI_VERSION_MAJOR
#endif

#if defined(BROKEN_WRONG_TORCH)
#define MANIFEST_TORCH_VERSION "1.0.0"
#else
#define MANIFEST_TORCH_VERSION GOOD_TORCH_VERSION
#endif

#if defined(BROKEN_WRONG_CXX_ABI)
#define MANIFEST_CXX11_ABI 0
#else
#define MANIFEST_CXX11_ABI GOOD_CXX11_ABI
#endif

#if defined(BROKEN_NULL_VTABLE)
#define DESCRIPTOR_KIND TRIAX_PLUGIN_OPTIMIZER
#define DESCRIPTOR_VTABLE 0
#elif defined(BROKEN_UNKNOWN_KIND)
#define DESCRIPTOR_KIND ((triax_plugin_kind)7)
#define DESCRIPTOR_VTABLE (&stub_vtable)
#else
#define DESCRIPTOR_KIND TRIAX_PLUGIN_OPTIMIZER
#define DESCRIPTOR_VTABLE (&stub_vtable)
#endif

static const triax_plugin_descriptor descriptors[] = {
    {DESCRIPTOR_KIND, "broken_stub", "0.0.1", "never accepted", DESCRIPTOR_VTABLE}};

static const triax_plugin_manifest manifest = {
    ABI_MAJOR, TRIAX_ABI_VERSION_MINOR, MANIFEST_TORCH_VERSION, MANIFEST_CXX11_ABI, 1, descriptors};

#if defined(BROKEN_MISSING_ENTRY)
/* Exports a look-alike under another name: the loader must not guess. */
TRIAX_PLUGIN_EXPORT const triax_plugin_manifest* triax_plugin_entry_v2(void) { return &manifest; }
#else
TRIAX_PLUGIN_EXPORT const triax_plugin_manifest* triax_plugin_entry(void) { return &manifest; }
#endif
