// Which tokenizer a token folder's metadata names, as something to compare: folders tokenized
// separately with the same tokenizer record different tokenizer.json paths, so a recorded file
// counts by its content (parsed JSON, so that formatting does not matter), a Hub name by itself.
#pragma once

#include <string>

namespace triax::data {

// `recorded`: the tokenizer the metadata names (a path or a Hub name); `folder`: the token
// folder, whose own tokenizer.json stands in when the recorded path no longer exists (a moved
// folder). Equal identities mean the same token ids.
std::string tokenizer_identity(const std::string& recorded, const std::string& folder);

}  // namespace triax::data
