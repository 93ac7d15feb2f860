// Finds, loads and checks plugin libraries (Boost.DLL), and hands out plugins by kind and name.
//
// A library is refused, with a message saying why, when its entry symbol is missing, its ABI
// major differs from the core's, it was built against another LibTorch version or C++ ABI, or
// it declares a plugin name that is already taken. Libraries found by scanning folders are
// refused one by one (listed by refusals()) without stopping the others; a library loaded
// explicitly throws.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "triax/abi.h"

namespace triax {

struct PluginRecord {
  triax_plugin_kind kind;
  std::string name;
  std::string version;
  std::string description;
  std::string library_path;
  const void* vtable;  // by kind: triax_model_vtable / triax_engine_vtable / triax_optimizer_vtable
};

struct PluginRefusal {
  std::string library_path;
  std::string reason;
};

const char* plugin_kind_name(triax_plugin_kind kind);
// How an optimizer wants its gradients (a triax_gradient_sharding): what its table declares, or
// TRIAX_GRADIENTS_WHOLE for a table from ABI 1.0, which ends before that member.
int32_t optimizer_gradient_sharding(const triax_optimizer_vtable& vtable);

// The optional ABI 1.3 members of a model plugin's table; null where the table ends before them
// (a plugin of ABI 1.0 to 1.2) or leaves them out.
struct ModelPluginExtras {
  const char* nanotron_marker = nullptr;
  const char* nanotron_marker_requires = nullptr;
  const char* flops_formula = nullptr;
  triax_status (*vocab_size)(const char* model_config_yaml, int64_t* out, triax_error* error) = nullptr;
  const triax_model_hf_vtable* hf = nullptr;
  uint32_t capabilities = 0;  // TRIAX_MODEL_* bits (ABI 1.5)
};
ModelPluginExtras model_plugin_extras(const triax_model_vtable& vtable);

class PluginRegistry {
 public:
  PluginRegistry();
  ~PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // Folders searched by default, in order: the plugin folder next to the executable (build
  // tree: <build>/plugins; installed: <prefix>/lib/triax/plugins), then TRIAX_PLUGIN_PATH
  // (colon-separated).
  static std::vector<std::string> default_search_paths();

  // Loads one library; throws PluginError naming the file and the reason.
  void load_library(const std::string& path);
  // Loads every shared library in `folder` (not recursive); refusals are collected.
  void scan_folder(const std::string& folder);
  // default_search_paths() followed by `extra` (the YAML's plugins.paths).
  void scan_search_paths(const std::vector<std::string>& extra = {});

  // Throws PluginError for an unknown name, listing the available names of that kind (and
  // the refused libraries, which may be why).
  const PluginRecord& find(triax_plugin_kind kind, const std::string& name) const;
  const triax_model_vtable& model(const std::string& name) const;
  const triax_engine_vtable& engine(const std::string& name) const;
  const triax_optimizer_vtable& optimizer(const std::string& name) const;

  const std::vector<PluginRecord>& plugins() const { return plugins_; }
  const std::vector<PluginRefusal>& refusals() const { return refusals_; }
  const std::vector<std::string>& searched_folders() const { return searched_; }

 private:
  // Loads and checks one library (an absolute path); on refusal returns false with the reason.
  bool try_load(const std::string& library_path, std::string& reason);

  struct Libraries;
  std::unique_ptr<Libraries> libraries_;  // keeps every accepted library loaded
  std::vector<PluginRecord> plugins_;
  std::vector<PluginRefusal> refusals_;
  std::vector<std::string> searched_;
};

}  // namespace triax
