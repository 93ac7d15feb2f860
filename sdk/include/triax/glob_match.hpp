// Name patterns with '*' (which linears train in fp8, which Hugging Face tensors a mapping
// ignores).
#pragma once

#include <string>

namespace triax {

// Whether `text` matches `pattern`, where '*' matches any run of characters and everything else
// itself.
bool glob_match(const std::string& pattern, const std::string& text);

// Whether `text` ends with `suffix` (a parameter name's last component: ".bias", ".weight").
bool ends_with(const std::string& text, const std::string& suffix);

}  // namespace triax
