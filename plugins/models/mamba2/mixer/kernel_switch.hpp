// Each of the mixer's CUDA kernels can be switched off for its LibTorch composition, to compare
// the two in one run: the environment variable named for it set to 0 (TRIAX_FUSED_KERNELS=0
// switches off every fused kernel at once).
#pragma once

namespace triax::mamba2 {

// False when `variable` is set to "0". Callers read it once and keep the answer.
bool kernel_switched_on(const char* variable);

}  // namespace triax::mamba2
