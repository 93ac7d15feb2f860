// The plugin loader: finds plugin libraries, loads them with Boost.DLL, checks each manifest
// against the core's ABI, LibTorch version and C++ ABI, and registers its plugins by kind and
// name. A library is accepted whole or refused whole: one bad descriptor or one name clash
// refuses every plugin of that library, so a half-registered library never exists.
//
// This file deliberately includes no LibTorch code: the core's LibTorch version comes from
// triax/torch_version.hpp, which is only preprocessor definitions.
#include "triax/core/plugins/plugin_registry.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <boost/filesystem.hpp>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "triax/error.hpp"
#include "triax/torch_version.hpp"

namespace triax {

namespace fs = boost::filesystem;

namespace {

// What the core was compiled against; a plugin's manifest must say the same.
constexpr const char* kCoreTorchVersion = TRIAX_TORCH_VERSION_STRING;
constexpr int32_t kCoreCxx11Abi = TRIAX_CXX11_ABI_FLAG;

// Tables as they were in ABI 1.0. A plugin of a later 1.x appends members, so its table is at
// least this large; a smaller one cannot come from a well-formed 1.x library.
constexpr size_t kModelVtableMinSize = offsetof(triax_model_vtable, nanotron_marker);
constexpr size_t kEngineVtableMinSize = sizeof(triax_engine_vtable);
constexpr size_t kOptimizerVtableMinSize = offsetof(triax_optimizer_vtable, gradient_sharding);

// Why a library is refused; caught by load_library, which names the file.
struct Refused {
  std::string reason;
};

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    out += items[i];
  }
  return out;
}

// An absolute, symlink-free spelling of an existing path; the path made absolute otherwise.
std::string clean_path(const std::string& path) {
  boost::system::error_code ec;
  fs::path canonical = fs::canonical(fs::path(path), ec);
  if (!ec) return canonical.string();
  return fs::absolute(fs::path(path)).lexically_normal().string();
}

bool is_folder(const std::string& path) {
  boost::system::error_code ec;
  return fs::is_directory(fs::path(path), ec);
}

// dlopen's own explanation of the last failure (Boost.DLL only reports "bad file descriptor").
std::string dlopen_failure(const boost::system::error_code& ec) {
  const char* text = dlerror();
  if (text != nullptr && *text != '\0') return text;
  return ec.message();
}

// Refuses a table without a function the host calls; `what` names the plugin.
void require(bool present, const std::string& what, const char* member) {
  if (!present) throw Refused{what + " has no '" + member + "' function in its vtable"};
}

// Each member: whether the table has it, and its name.
void require_all(std::initializer_list<std::pair<bool, const char*>> members, const std::string& what) {
  for (const auto& [present, member] : members) require(present, what, member);
}

void require_size(size_t size, size_t minimum, const std::string& what) {
  if (size < minimum)
    throw Refused{what + " has a vtable of " + std::to_string(size) + " bytes, smaller than the " +
                  std::to_string(minimum) + " bytes of ABI " + std::to_string(TRIAX_ABI_VERSION_MAJOR) + ".0"};
}

void check_hf_table(const triax_model_hf_vtable& hf, const std::string& what) {
  if (hf.struct_size < sizeof(triax_model_hf_vtable))
    throw Refused{what + " has a Hugging Face table of " + std::to_string(hf.struct_size) +
                  " bytes, smaller than ABI 1.3's"};
  require(hf.architecture_count > 0 && hf.architectures != nullptr, what, "hf.architectures");
  for (int32_t i = 0; i < hf.architecture_count; ++i) require(hf.architectures[i] != nullptr, what, "hf.architectures");
  require(hf.config_from_hf != nullptr, what, "hf.config_from_hf");
  require(hf.config_to_hf != nullptr, what, "hf.config_to_hf");
  require(hf.tensor_map != nullptr, what, "hf.tensor_map");
}

void check_model_table(const triax_model_vtable& v, const std::string& what) {
  require_all({{v.create != nullptr, "create"},
               {v.destroy != nullptr, "destroy"},
               {v.forward != nullptr, "forward"},
               {v.describe_blocks != nullptr, "describe_blocks"},
               {v.parameter_count != nullptr, "parameter_count"},
               {v.parameter_info != nullptr, "parameter_info"},
               {v.flops_per_token != nullptr, "flops_per_token"},
               {v.total_parameters != nullptr, "total_parameters"},
               {v.set_training != nullptr, "set_training"},
               {v.resolved_config != nullptr, "resolved_config"}},
              what);
  if (const triax_model_hf_vtable* hf = model_plugin_extras(v).hf) check_hf_table(*hf, what);
}

void check_engine_table(const triax_engine_vtable& v, const std::string& what) {
  require_all(
      {{v.create != nullptr, "create"}, {v.destroy != nullptr, "destroy"}, {v.train_step != nullptr, "train_step"}},
      what);
}

void check_optimizer_table(const triax_optimizer_vtable& v, const std::string& what) {
  require_all({{v.create != nullptr, "create"},
               {v.destroy != nullptr, "destroy"},
               {v.step != nullptr, "step"},
               {v.state_bytes != nullptr, "state_bytes"}},
              what);
  const int32_t sharding = optimizer_gradient_sharding(v);
  if (sharding != TRIAX_GRADIENTS_WHOLE && sharding != TRIAX_GRADIENTS_DP_SHARDED &&
      sharding != TRIAX_GRADIENTS_PARAMETERS_SHARDED)
    throw Refused{what + " declares gradient_sharding " + std::to_string(sharding) +
                  " (known: 0 = whole gradients, 1 = dp-sharded, 2 = parameters sharded)"};
}

void check_vtable(const triax_plugin_descriptor& d) {
  const std::string what = std::string(plugin_kind_name(d.kind)) + " plugin '" + d.name + "'";
  const size_t size = *static_cast<const size_t*>(d.vtable);  // every table starts with its size
  switch (d.kind) {
    case TRIAX_PLUGIN_MODEL:
      require_size(size, kModelVtableMinSize, what);
      check_model_table(*static_cast<const triax_model_vtable*>(d.vtable), what);
      break;
    case TRIAX_PLUGIN_ENGINE:
      require_size(size, kEngineVtableMinSize, what);
      check_engine_table(*static_cast<const triax_engine_vtable*>(d.vtable), what);
      break;
    case TRIAX_PLUGIN_OPTIMIZER:
      require_size(size, kOptimizerVtableMinSize, what);
      check_optimizer_table(*static_cast<const triax_optimizer_vtable*>(d.vtable), what);
      break;
  }
}

// RTLD_NOW: a library with an unresolved symbol is refused here, with dlopen's message, rather
// than failing in the middle of a run. RTLD_LOCAL: plugins do not see each other's symbols;
// everything they share crosses the C ABI. RTLD_NODELETE: a plugin stays mapped until the process
// ends, whatever the registry's lifetime: tensors and autograd state it created may outlive the
// registry, and unloading code they point into is never safe.
boost::dll::shared_library open_library(const std::string& library_path) {
  boost::system::error_code ec;
  const auto mode = static_cast<boost::dll::load_mode::type>(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  boost::dll::shared_library library(fs::path(library_path), ec, mode);
  if (ec) throw Refused{"not a loadable shared library: " + dlopen_failure(ec)};
  if (!library.has(TRIAX_PLUGIN_ENTRY_SYMBOL))
    throw Refused{"no entry symbol '" TRIAX_PLUGIN_ENTRY_SYMBOL
                  "' (a plugin library declares its plugins with TRIAX_PLUGIN_LIBRARY(...))"};
  return library;
}

const triax_plugin_manifest* manifest_of(const boost::dll::shared_library& library) {
  auto entry = library.get<const triax_plugin_manifest*()>(TRIAX_PLUGIN_ENTRY_SYMBOL);
  const triax_plugin_manifest* manifest = entry();
  if (manifest == nullptr) throw Refused{"its entry symbol '" TRIAX_PLUGIN_ENTRY_SYMBOL "' returned no manifest"};
  return manifest;
}

// The library must be built for this ABI, LibTorch and C++ ABI, with a well-formed plugin list.
void check_manifest(const triax_plugin_manifest& manifest) {
  if (manifest.abi_major != TRIAX_ABI_VERSION_MAJOR)
    throw Refused{"built for plugin ABI " + std::to_string(manifest.abi_major) + "." +
                  std::to_string(manifest.abi_minor) + ", but this triax uses ABI " +
                  std::to_string(TRIAX_ABI_VERSION_MAJOR) + "." + std::to_string(TRIAX_ABI_VERSION_MINOR) +
                  " (the major versions must match): rebuild the plugin against this triax SDK"};
  const std::string torch_version = manifest.torch_version != nullptr ? manifest.torch_version : "";
  if (torch_version != kCoreTorchVersion)
    throw Refused{"built against LibTorch " + (torch_version.empty() ? std::string("(unknown)") : torch_version) +
                  ", but this triax uses LibTorch " + kCoreTorchVersion +
                  ": tensors cross the plugin boundary, so both must use the same LibTorch"};
  if (manifest.cxx11_abi != kCoreCxx11Abi)
    throw Refused{"built with _GLIBCXX_USE_CXX11_ABI=" + std::to_string(manifest.cxx11_abi) +
                  ", but this triax uses _GLIBCXX_USE_CXX11_ABI=" + std::to_string(kCoreCxx11Abi)};
  if (manifest.plugin_count < 0 || (manifest.plugin_count > 0 && manifest.plugins == nullptr))
    throw Refused{"its manifest has a malformed plugin list (count " + std::to_string(manifest.plugin_count) + ")"};
}

// Plugin `index` of a library's manifest, checked.
PluginRecord record_of(const triax_plugin_descriptor& d, int32_t index, const std::string& library_path) {
  const std::string where = "plugin #" + std::to_string(index);
  if (d.kind != TRIAX_PLUGIN_MODEL && d.kind != TRIAX_PLUGIN_ENGINE && d.kind != TRIAX_PLUGIN_OPTIMIZER)
    throw Refused{where + " has an unknown kind (" + std::to_string(static_cast<int>(d.kind)) +
                  "; known: 1 = model, 2 = engine, 3 = optimizer)"};
  if (d.name == nullptr || *d.name == '\0') throw Refused{where + " (" + plugin_kind_name(d.kind) + ") has no name"};
  if (d.vtable == nullptr)
    throw Refused{std::string(plugin_kind_name(d.kind)) + " plugin '" + d.name + "' has no vtable"};
  check_vtable(d);
  return PluginRecord{
      d.kind,       d.name,  d.version != nullptr ? d.version : "", d.description != nullptr ? d.description : "",
      library_path, d.vtable};
}

// Plugin names are unique per kind: within the library (`earlier` of its plugins) and among the
// plugins of the libraries loaded before.
void refuse_duplicate(const PluginRecord& record, const std::vector<PluginRecord>& earlier,
                      const std::vector<PluginRecord>& registered) {
  const std::string kind = plugin_kind_name(record.kind);
  for (const PluginRecord& other : earlier)
    if (other.kind == record.kind && other.name == record.name)
      throw Refused{"it declares " + kind + " plugin '" + record.name + "' twice"};
  for (const PluginRecord& other : registered)
    if (other.kind == record.kind && other.name == record.name)
      throw Refused{kind + " plugin '" + record.name + "' is already provided by " + other.library_path + "; " +
                    record.library_path + " declares it again (plugin names must be unique per kind)"};
}

}  // namespace

int32_t optimizer_gradient_sharding(const triax_optimizer_vtable& vtable) {
  const size_t end = offsetof(triax_optimizer_vtable, gradient_sharding) + sizeof(vtable.gradient_sharding);
  return vtable.struct_size >= end ? vtable.gradient_sharding : TRIAX_GRADIENTS_WHOLE;
}

ModelPluginExtras model_plugin_extras(const triax_model_vtable& vtable) {
  ModelPluginExtras extras;
  auto covers = [&](size_t end) { return vtable.struct_size >= end; };
  if (covers(offsetof(triax_model_vtable, nanotron_marker_requires) + sizeof(vtable.nanotron_marker_requires))) {
    extras.nanotron_marker = vtable.nanotron_marker;
    extras.nanotron_marker_requires = vtable.nanotron_marker_requires;
  }
  if (covers(offsetof(triax_model_vtable, flops_formula) + sizeof(vtable.flops_formula)))
    extras.flops_formula = vtable.flops_formula;
  if (covers(offsetof(triax_model_vtable, vocab_size) + sizeof(vtable.vocab_size)))
    extras.vocab_size = vtable.vocab_size;
  if (covers(offsetof(triax_model_vtable, hf) + sizeof(vtable.hf))) extras.hf = vtable.hf;
  if (covers(offsetof(triax_model_vtable, capabilities) + sizeof(vtable.capabilities)))
    extras.capabilities = vtable.capabilities;
  return extras;
}

const char* plugin_kind_name(triax_plugin_kind kind) {
  switch (kind) {
    case TRIAX_PLUGIN_MODEL:
      return "model";
    case TRIAX_PLUGIN_ENGINE:
      return "engine";
    case TRIAX_PLUGIN_OPTIMIZER:
      return "optimizer";
  }
  return "unknown";
}

struct PluginRegistry::Libraries {
  struct Loaded {
    std::string path;
    const triax_plugin_manifest* manifest;
    boost::dll::shared_library library;
  };
  std::vector<Loaded> loaded;  // accepted libraries, in load order

  const Loaded* find_path(const std::string& path) const {
    for (const Loaded& l : loaded)
      if (l.path == path) return &l;
    return nullptr;
  }
  const Loaded* find_manifest(const triax_plugin_manifest* manifest) const {
    for (const Loaded& l : loaded)
      if (l.manifest == manifest) return &l;
    return nullptr;
  }
};

PluginRegistry::PluginRegistry() : libraries_(std::make_unique<Libraries>()) {}

// Plugins are forgotten before their libraries are unloaded. (A library that links LibTorch
// stays mapped after dlclose anyway; small C libraries really go.)
PluginRegistry::~PluginRegistry() {
  plugins_.clear();
  libraries_.reset();
}

std::vector<std::string> PluginRegistry::default_search_paths() {
  std::vector<std::string> paths;
  auto add = [&paths](const std::string& folder) {
    if (std::find(paths.begin(), paths.end(), folder) == paths.end()) paths.push_back(folder);
  };

  boost::system::error_code ec;
  const fs::path executable = boost::dll::program_location(ec);
  if (!ec) {
    const fs::path bin = executable.parent_path();
    // Build tree: <build>/bin/triax next to <build>/plugins. Installed: <prefix>/bin/triax and
    // <prefix>/<libdir>/triax/plugins.
    for (const fs::path& candidate : {bin / ".." / "plugins", bin / ".." / TRIAX_PLUGIN_INSTALL_DIR})
      if (is_folder(candidate.string())) add(clean_path(candidate.string()));
  }

  if (const char* env = std::getenv("TRIAX_PLUGIN_PATH")) {
    std::stringstream entries(env);
    std::string entry;
    while (std::getline(entries, entry, ':'))
      if (!entry.empty()) add(clean_path(entry));
  }
  return paths;
}

void PluginRegistry::load_library(const std::string& path) {
  const std::string library_path = clean_path(path);
  std::string reason;
  if (!try_load(library_path, reason)) throw PluginError("plugin library " + library_path + " refused: " + reason);
}

bool PluginRegistry::try_load(const std::string& library_path, std::string& reason) {
  try {
    // Loaded already, under this spelling: nothing to do (a folder may be listed twice).
    if (libraries_->find_path(library_path) != nullptr) return true;
    boost::dll::shared_library library = open_library(library_path);
    const triax_plugin_manifest* manifest = manifest_of(library);
    // The same library reached through another path (a hard link, a copy dlopen shares).
    if (libraries_->find_manifest(manifest) != nullptr) return true;
    check_manifest(*manifest);

    std::vector<PluginRecord> records;
    for (int32_t i = 0; i < manifest->plugin_count; ++i) {
      PluginRecord record = record_of(manifest->plugins[i], i, library_path);
      refuse_duplicate(record, records, plugins_);
      records.push_back(std::move(record));
    }
    libraries_->loaded.push_back({library_path, manifest, std::move(library)});
    plugins_.insert(plugins_.end(), records.begin(), records.end());
    return true;
  } catch (const Refused& refused) {
    reason = refused.reason;
    return false;
  } catch (const std::exception& e) {  // Boost.DLL or Boost.Filesystem failing underneath
    reason = e.what();
    return false;
  }
}

void PluginRegistry::scan_folder(const std::string& folder) {
  const std::string clean = clean_path(folder);
  if (std::find(searched_.begin(), searched_.end(), clean) == searched_.end()) searched_.push_back(clean);
  if (!is_folder(clean)) {
    refusals_.push_back({clean, "plugin folder does not exist (or is not a folder)"});
    return;
  }

  std::vector<std::string> files;
  boost::system::error_code ec;
  for (fs::directory_iterator it(fs::path(clean), ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    boost::system::error_code status_ec;
    if (p.extension() == ".so" && fs::is_regular_file(p, status_ec)) files.push_back(p.string());
  }
  if (ec) {
    refusals_.push_back({clean, "cannot list plugin folder: " + ec.message()});
    return;
  }
  std::sort(files.begin(), files.end());

  for (const std::string& file : files) {
    const std::string library_path = clean_path(file);
    std::string reason;
    if (try_load(library_path, reason)) continue;
    const bool known = std::any_of(refusals_.begin(), refusals_.end(),
                                   [&](const PluginRefusal& r) { return r.library_path == library_path; });
    if (!known) refusals_.push_back({library_path, reason});
  }
}

void PluginRegistry::scan_search_paths(const std::vector<std::string>& extra) {
  for (const std::string& folder : default_search_paths()) scan_folder(folder);
  for (const std::string& folder : extra) scan_folder(folder);
}

const PluginRecord& PluginRegistry::find(triax_plugin_kind kind, const std::string& name) const {
  std::vector<std::string> available;
  for (const PluginRecord& record : plugins_) {
    if (record.kind != kind) continue;
    if (record.name == name) return record;
    available.push_back(record.name);
  }
  std::sort(available.begin(), available.end());

  const std::string kind_name = plugin_kind_name(kind);
  std::string message = "unknown " + kind_name + " plugin '" + name + "'; available " + kind_name +
                        " plugins: " + (available.empty() ? std::string("none") : join(available, ", ")) +
                        " (searched: " + (searched_.empty() ? std::string("no folders") : join(searched_, ", ")) + ")";
  for (const PluginRecord& record : plugins_)
    if (record.name == name)
      message += "; note: '" + name + "' is registered as a plugin of kind " + plugin_kind_name(record.kind) + " (" +
                 record.library_path + ")";
  if (!refusals_.empty()) {
    std::vector<std::string> refused;
    for (const PluginRefusal& r : refusals_) refused.push_back(r.library_path + ": " + r.reason);
    message += "; refused libraries: " + join(refused, "; ");
  }
  throw PluginError(message);
}

const triax_model_vtable& PluginRegistry::model(const std::string& name) const {
  const PluginRecord& record = find(TRIAX_PLUGIN_MODEL, name);
  return *static_cast<const triax_model_vtable*>(record.vtable);
}

const triax_engine_vtable& PluginRegistry::engine(const std::string& name) const {
  const PluginRecord& record = find(TRIAX_PLUGIN_ENGINE, name);
  return *static_cast<const triax_engine_vtable*>(record.vtable);
}

const triax_optimizer_vtable& PluginRegistry::optimizer(const std::string& name) const {
  const PluginRecord& record = find(TRIAX_PLUGIN_OPTIMIZER, name);
  return *static_cast<const triax_optimizer_vtable*>(record.vtable);
}

}  // namespace triax
