#include "triax/tensor_text.hpp"

#include <sstream>

namespace triax {
namespace {

struct DtypeSpelling {
  const char* name;
  c10::ScalarType type;
};

constexpr DtypeSpelling kSpellings[] = {
    {"float32", c10::kFloat}, {"float64", c10::kDouble}, {"bfloat16", c10::kBFloat16}, {"float16", c10::kHalf},
    {"int64", c10::kLong},    {"int32", c10::kInt},      {"uint8", c10::kByte},        {"bool", c10::kBool}};

}  // namespace

std::string shape_text(c10::IntArrayRef shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

std::string dtype_name(c10::ScalarType type) {
  for (const DtypeSpelling& spelling : kSpellings)
    if (spelling.type == type) return spelling.name;
  return c10::toString(type);
}

std::optional<c10::ScalarType> dtype_from_name(const std::string& name) {
  for (const DtypeSpelling& spelling : kSpellings)
    if (name == spelling.name) return spelling.type;
  return std::nullopt;
}

}  // namespace triax
