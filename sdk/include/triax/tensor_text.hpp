// How triax names tensor shapes and dtypes in messages and files: "[61, 32]", "bfloat16".
// One spelling everywhere (checkpoint files, Hugging Face folders, error messages).
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <optional>
#include <string>

namespace triax {

// "[61, 32]"; "[]" for a scalar.
std::string shape_text(c10::IntArrayRef shape);

// "float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"; LibTorch's
// own name for any other type.
std::string dtype_name(c10::ScalarType type);
// The inverse of dtype_name for the names above; nullopt for anything else.
std::optional<c10::ScalarType> dtype_from_name(const std::string& name);

}  // namespace triax
