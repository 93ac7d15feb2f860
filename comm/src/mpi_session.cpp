#include "mpi_session.hpp"

#include <ATen/ATen.h>

#include <limits>

namespace triax {
namespace mpi_detail {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

// The MPI type that moves a tensor's elements unchanged (half types travel as 16-bit words).
MPI_Datatype transfer_type(const at::Tensor& tensor, const char* operation) {
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return MPI_FLOAT;
    case at::kDouble:
      return MPI_DOUBLE;
    case at::kBFloat16:
    case at::kHalf:
      return MPI_UINT16_T;
    case at::kLong:
      return MPI_INT64_T;
    case at::kInt:
      return MPI_INT32_T;
    case at::kByte:
    case at::kBool:
      return MPI_UINT8_T;
    default:
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(operation) + ": the mpi backend does not handle " +
                                                    std::string(c10::toString(tensor.scalar_type())) +
                                                    " tensors (float32, float64, bfloat16, float16, int64, int32, "
                                                    "uint8 are supported)");
  }
}

MPI_Op mpi_op(triax_reduce_op op) {
  switch (op) {
    case TRIAX_REDUCE_SUM:
    case TRIAX_REDUCE_AVG:
      return MPI_SUM;
    case TRIAX_REDUCE_MAX:
      return MPI_MAX;
    case TRIAX_REDUCE_MIN:
      return MPI_MIN;
  }
  throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "unknown reduce op " + std::to_string(static_cast<int>(op)));
}

bool is_half_type(const at::Tensor& tensor) {
  return tensor.scalar_type() == at::kBFloat16 || tensor.scalar_type() == at::kHalf;
}

// MPI has no 16-bit float arithmetic: reductions of bf16/fp16 run in fp32 (one rounding at the end).
at::Tensor reduction_buffer(const at::Tensor& tensor) {
  if (is_half_type(tensor)) return tensor.to(at::kFloat).contiguous();
  if (tensor.scalar_type() == at::kBool)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "reductions of bool tensors are not supported");
  return tensor.contiguous();
}

void finish_average(const at::Tensor& buffer, triax_reduce_op op, int group_size) {
  if (op != TRIAX_REDUCE_AVG) return;
  if (at::isFloatingType(buffer.scalar_type()))
    buffer.div_(group_size);
  else
    buffer.div_(group_size, "trunc");
}

// Writes `result` into `target` unless they already share memory.
void write_back(const at::Tensor& target, const at::Tensor& result) {
  if (!result.is_same(target)) target.copy_(result);
}

int element_count(int64_t elements, const char* operation) {
  if (elements > std::numeric_limits<int>::max())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(operation) + ": " + std::to_string(elements) +
                                                  " elements exceed MPI's int count; split the tensor");
  return static_cast<int>(elements);
}

// Buffers of operations abandoned at a timeout: MPI may still write into them when the silent
// peer answers at last, so they are never freed.
void abandon(const std::vector<at::Tensor>& buffers) {
  static auto* graveyard = new std::vector<at::Tensor>();
  graveyard->insert(graveyard->end(), buffers.begin(), buffers.end());
}

// An input that shares memory with the output is copied first: MPI forbids overlapping buffers.
at::Tensor separate_input(const at::Tensor& input, const at::Tensor& output) {
  const bool overlaps = input.is_alias_of(output);
  return overlaps ? input.clone() : input.contiguous();
}

}  // namespace mpi_detail

std::unique_ptr<PendingOperation> MpiCommunicator::Impl::start(triax_group group, const char* operation,
                                                               std::vector<at::Tensor> buffers,
                                                               const std::function<int(MPI_Request*)>& post,
                                                               std::function<void()> finish) {
  require_usable();
  std::vector<int> members = context.members(group);
  std::string what = describe(operation, group);
  auto pending = std::make_unique<MpiPendingOperation>(*this, what, members, std::move(buffers), std::move(finish));
  post_or_fail(post(pending->request()), what, members);
  return pending;
}

}  // namespace triax
