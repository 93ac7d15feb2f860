#include "in_proj_gradient.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "triax/environment_switch.hpp"

namespace triax::mamba2 {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Whether `grad` is `slot` itself: the same memory, sizes and strides (those of size-1 dims aside).
bool is_slot(const at::Tensor& grad, const at::Tensor& slot) {
  if (grad.data_ptr() != slot.data_ptr() || grad.sizes() != slot.sizes()) return false;
  for (int64_t d = 0; d < grad.dim(); ++d)
    if (grad.size(d) > 1 && grad.stride(d) != slot.stride(d)) return false;
  return true;
}

// The largest storage offset `t` addresses (t non-empty, strides non-negative).
int64_t last_offset(const at::Tensor& t) {
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return last;
}

// Views of in_proj's output whose backward lands their gradients in the InProjGradient's buffer.
class SplitInProjFunction : public torch::autograd::Function<SplitInProjFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& output, const std::vector<int64_t>& sizes,
                               const c10::intrusive_ptr<InProjGradient>& gradient) {
    ctx->set_materialize_grads(false);  // an unused part's zeros are written into its slot, not copied there
    ctx->saved_data["sizes"] = sizes;
    ctx->saved_data["gradient"] = as_saved(gradient);
    return output.split_with_sizes(sizes, output.dim() - 1);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const c10::intrusive_ptr<InProjGradient> gradient = from_saved(ctx->saved_data["gradient"]);
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();
    return {gradient->joined(sizes, grads), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

InProjGradient::InProjGradient(const at::Tensor& output)
    : sizes_(output.sizes().vec()),
      options_(output.options()),
      storage_(output.storage().getWeakStorageImpl()),
      offset_(output.storage_offset()) {}

at::Tensor InProjGradient::take_buffer() {
  if (!buffer_.defined()) buffer_ = at::empty(sizes_, options_.memory_format(at::MemoryFormat::Contiguous));
  return buffer_;
}

at::Tensor InProjGradient::slot_for(const at::Tensor& input) {
  if (!input.defined() || input.numel() == 0 || !input.has_storage() || input.dtype() != options_.dtype() ||
      input.device() != options_.device() || storage_.expired() ||
      input.storage().unsafeGetStorageImpl() != storage_._unsafe_get_target())
    return {};
  for (int64_t d = 0; d < input.dim(); ++d)
    if (input.stride(d) < 0) return {};
  int64_t numel = 1;
  for (int64_t s : sizes_) numel *= s;
  if (input.storage_offset() < offset_ || last_offset(input) >= offset_ + numel) return {};
  if (std::find(given_.begin(), given_.end(), input.storage_offset()) != given_.end()) return {};
  given_.push_back(input.storage_offset());
  const at::Tensor buffer = take_buffer();
  return buffer.as_strided(input.sizes(), input.strides(), buffer.storage_offset() + input.storage_offset() - offset_);
}

at::Tensor InProjGradient::joined(const std::vector<int64_t>& sizes, const std::vector<at::Tensor>& grads) {
  const int64_t last = static_cast<int64_t>(sizes_.size()) - 1;
  at::Tensor buffer = std::move(buffer_);
  buffer_ = at::Tensor();
  given_.clear();
  if (!buffer.defined()) {  // nothing landed: LibTorch's split backward, one cat
    std::vector<int64_t> part_sizes = sizes_;
    std::vector<at::Tensor> filled;
    for (size_t i = 0; i < grads.size(); ++i) {
      part_sizes[last] = sizes[i];
      filled.push_back(grads[i].defined() ? grads[i] : at::zeros(part_sizes, options_));
    }
    return at::cat(filled, last);
  }
  const std::vector<at::Tensor> slots = buffer.split_with_sizes(sizes, last);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!grads[i].defined())
      slots[i].zero_();
    else if (!is_slot(grads[i], slots[i]))
      slots[i].copy_(grads[i]);
  }
  return buffer;
}

std::vector<at::Tensor> split_in_proj_output(const at::Tensor& output, const std::vector<int64_t>& sizes,
                                             const c10::intrusive_ptr<InProjGradient>& gradient) {
  if (!gradient) return output.split_with_sizes(sizes, output.dim() - 1);
  return SplitInProjFunction::apply(output, sizes, gradient);
}

c10::intrusive_ptr<InProjGradient> in_proj_gradient_for(const at::Tensor& output) {
  if (!landed_in_proj_gradient_switched_on() || !at::GradMode::is_enabled() || !output.requires_grad() ||
      !output.is_contiguous() || output.numel() == 0)
    return {};
  return c10::make_intrusive<InProjGradient>(output);
}

bool landed_in_proj_gradient_switched_on() { return switched_on_unless_zero("TRIAX_MAMBA2_LANDED_IN_PROJ_GRADIENT"); }

at::IValue as_saved(const c10::intrusive_ptr<InProjGradient>& gradient) {
  if (!gradient) return at::IValue();
  return at::IValue::make_capsule(c10::intrusive_ptr<torch::CustomClassHolder>(gradient));
}

c10::intrusive_ptr<InProjGradient> from_saved(const at::IValue& saved) {
  if (saved.isNone()) return {};
  return c10::static_intrusive_pointer_cast<InProjGradient>(saved.toCapsule());
}

}  // namespace triax::mamba2
