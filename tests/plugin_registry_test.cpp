// The plugin loader against small libraries built for it (tests/plugins.cmake): one good
// library (an SGD optimizer and an engine), one declaring the good optimizer's name again, and
// hand-written manifests with a wrong ABI, a missing entry symbol, a wrong LibTorch version, ...
#include "triax/core/plugins/plugin_registry.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/headeronly/version.h>

#include <boost/filesystem.hpp>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "triax/error.hpp"
#include "triax/tensor_handle.hpp"

namespace fs = boost::filesystem;
using triax::PluginError;
using triax::PluginRegistry;

namespace {

const std::string kPluginsDir = TRIAX_TEST_PLUGINS_DIR;

std::string folder(const std::string& name) { return fs::canonical(kPluginsDir + "/" + name).string(); }
std::string good_library() { return folder("good") + "/test_plugin_good.so"; }
std::string duplicate_library() { return folder("duplicate") + "/test_plugin_duplicate.so"; }
std::string broken_library(const std::string& name) { return folder("broken") + "/" + name + ".so"; }

// The message of the PluginError that load_library throws for `path`.
std::string refusal_of(const std::string& path) {
  PluginRegistry registry;
  try {
    registry.load_library(path);
  } catch (const PluginError& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " was accepted";
  return {};
}

// Restores TRIAX_PLUGIN_PATH when a test ends.
class ScopedPluginPath {
 public:
  explicit ScopedPluginPath(const char* value) {
    if (const char* old = std::getenv("TRIAX_PLUGIN_PATH")) old_ = old, had_ = true;
    if (value != nullptr)
      setenv("TRIAX_PLUGIN_PATH", value, 1);
    else
      unsetenv("TRIAX_PLUGIN_PATH");
  }
  ~ScopedPluginPath() {
    if (had_)
      setenv("TRIAX_PLUGIN_PATH", old_.c_str(), 1);
    else
      unsetenv("TRIAX_PLUGIN_PATH");
  }

 private:
  std::string old_;
  bool had_ = false;
};

class TempFolder {
 public:
  TempFolder() : path_(fs::temp_directory_path() / fs::unique_path("triax-plugins-%%%%-%%%%")) {
    fs::create_directories(path_);
    path_ = fs::canonical(path_);
  }
  ~TempFolder() {
    boost::system::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

}  // namespace

TEST(PluginRegistry, KindNames) {
  EXPECT_STREQ(triax::plugin_kind_name(TRIAX_PLUGIN_MODEL), "model");
  EXPECT_STREQ(triax::plugin_kind_name(TRIAX_PLUGIN_ENGINE), "engine");
  EXPECT_STREQ(triax::plugin_kind_name(TRIAX_PLUGIN_OPTIMIZER), "optimizer");
}

TEST(PluginRegistry, GoodLibraryRegistersItsPlugins) {
  PluginRegistry registry;
  registry.load_library(good_library());
  ASSERT_EQ(registry.plugins().size(), 2u);
  EXPECT_TRUE(registry.refusals().empty());

  const triax::PluginRecord& sgd = registry.find(TRIAX_PLUGIN_OPTIMIZER, "test_sgd");
  EXPECT_EQ(sgd.kind, TRIAX_PLUGIN_OPTIMIZER);
  EXPECT_EQ(sgd.name, "test_sgd");
  EXPECT_EQ(sgd.version, "1.2.3");
  EXPECT_EQ(sgd.description, "SGD with momentum (loader test)");
  EXPECT_EQ(sgd.library_path, good_library());

  const triax_engine_vtable& engine = registry.engine("test_sequential");
  EXPECT_EQ(engine.struct_size, sizeof(triax_engine_vtable));
  EXPECT_NE(engine.train_step, nullptr);

  // Loading the same library again changes nothing.
  registry.load_library(good_library());
  EXPECT_EQ(registry.plugins().size(), 2u);
}

TEST(PluginRegistry, OptimizerStepsATensorThroughTheCVtable) {
  PluginRegistry registry;
  registry.load_library(good_library());
  const triax_optimizer_vtable& vtable = registry.optimizer("test_sgd");

  at::Tensor param = at::tensor({1.0f, 2.0f, 3.0f});
  at::Tensor grad = at::tensor({0.5f, -1.0f, 2.0f});
  triax_optimizer_param p{"w", triax::borrow_handle(param), 0.0, 0};
  triax_optimizer_context context{};
  context.struct_size = sizeof(context);
  context.dp_rank = 0;
  context.dp_size = 1;
  context.optimizer_yaml = "momentum: 0.5";
  context.host = nullptr;

  triax_optimizer* optimizer = nullptr;
  triax_error error{};
  ASSERT_EQ(vtable.create(&context, &p, 1, &optimizer, &error), TRIAX_OK) << error.message;
  ASSERT_NE(optimizer, nullptr);
  EXPECT_EQ(vtable.state_bytes(optimizer), 3 * 4);

  triax_tensor* grads[] = {triax::borrow_handle(grad)};
  const double lr = 0.1;
  // m1 = g; p1 = p0 - lr g.  m2 = 0.5 g + g = 1.5 g; p2 = p1 - 1.5 lr g.
  ASSERT_EQ(vtable.step(optimizer, grads, 1, lr, &error), TRIAX_OK) << error.message;
  EXPECT_TRUE(at::allclose(param, at::tensor({0.95f, 2.1f, 2.8f})));
  ASSERT_EQ(vtable.step(optimizer, grads, 1, lr, &error), TRIAX_OK) << error.message;
  EXPECT_TRUE(at::allclose(param, at::tensor({0.875f, 2.25f, 2.5f}))) << param;

  // A failure inside the plugin comes back as a status and a message, not an exception.
  EXPECT_EQ(vtable.step(optimizer, grads, 0, lr, &error), TRIAX_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(error.message, "expected 1 gradients, got 0");
  vtable.destroy(optimizer);

  context.optimizer_yaml = "momentum: 1.5";
  EXPECT_EQ(vtable.create(&context, &p, 1, &optimizer, &error), TRIAX_ERROR_INVALID_CONFIG);
  EXPECT_CONTAINS(error.message, "optimizer.momentum");
}

TEST(PluginRegistry, RefusesAnotherAbiMajor) {
  const std::string path = broken_library("wrong_abi");
  const std::string message = refusal_of(path);
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "ABI " + std::to_string(TRIAX_ABI_VERSION_MAJOR + 1) + ".");
  EXPECT_CONTAINS(message, "ABI " + std::to_string(TRIAX_ABI_VERSION_MAJOR) + ".");
}

TEST(PluginRegistry, RefusesAMissingEntrySymbol) {
  const std::string path = broken_library("missing_entry");
  const std::string message = refusal_of(path);
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "no entry symbol '" TRIAX_PLUGIN_ENTRY_SYMBOL "'");
}

TEST(PluginRegistry, RefusesAnotherTorchVersion) {
  const std::string path = broken_library("wrong_torch");
  const std::string message = refusal_of(path);
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "LibTorch 1.0.0");
  EXPECT_CONTAINS(message, "LibTorch " TORCH_VERSION);
}

TEST(PluginRegistry, RefusesAnotherCxxAbi) {
  const std::string message = refusal_of(broken_library("wrong_cxx_abi"));
  EXPECT_CONTAINS(message, "wrong_cxx_abi.so");
  EXPECT_CONTAINS(message, "_GLIBCXX_USE_CXX11_ABI=0");
}

TEST(PluginRegistry, RefusesMalformedDescriptors) {
  EXPECT_CONTAINS(refusal_of(broken_library("null_vtable")), "optimizer plugin 'broken_stub' has no vtable");
  EXPECT_CONTAINS(refusal_of(broken_library("unknown_kind")), "unknown kind (7");
}

TEST(PluginRegistry, RefusesAnUnknownGradientSharding) {
  EXPECT_CONTAINS(refusal_of(broken_library("bad_sharding")),
                  "optimizer plugin 'broken_stub' declares gradient_sharding 7 (known: 0 = whole gradients, 1 = "
                  "dp-sharded, 2 = parameters sharded)");
}

// ABI 1.1 appended gradient_sharding to the optimizer table: a 1.0 library still loads, and its
// optimizer takes whole gradients. The SDK's adapter fills the member in.
TEST(PluginRegistry, AcceptsAnAbi10OptimizerAsTakingWholeGradients) {
  PluginRegistry registry;
  registry.load_library(folder("abi_1_0") + "/optimizer_abi_1_0.so");
  EXPECT_EQ(triax::optimizer_gradient_sharding(registry.optimizer("abi_1_0_optimizer")), TRIAX_GRADIENTS_WHOLE);
  registry.load_library(good_library());
  const triax_optimizer_vtable& sdk_table = registry.optimizer("test_sgd");
  EXPECT_EQ(sdk_table.struct_size, sizeof(triax_optimizer_vtable));
  EXPECT_EQ(triax::optimizer_gradient_sharding(sdk_table), TRIAX_GRADIENTS_WHOLE);
}

TEST(PluginRegistry, RefusesAFileThatIsNoLibrary) {
  TempFolder temp;
  const std::string path = temp.str() + "/not_a_library.so";
  std::ofstream(path) << "this is text\n";
  const std::string message = refusal_of(path);
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "not a loadable shared library");
  // dlopen's own words, which name the file too
  EXPECT_CONTAINS(message, "not_a_library.so: ");
}

TEST(PluginRegistry, RefusesADuplicateNameNamingBothLibraries) {
  PluginRegistry registry;
  registry.load_library(good_library());
  try {
    registry.load_library(duplicate_library());
    FAIL() << "duplicate accepted";
  } catch (const PluginError& e) {
    EXPECT_CONTAINS(e.what(), "optimizer plugin 'test_sgd'");
    EXPECT_CONTAINS(e.what(), good_library());
    EXPECT_CONTAINS(e.what(), duplicate_library());
  }
  // The refused library registered nothing; the first one is intact.
  EXPECT_EQ(registry.plugins().size(), 2u);
  EXPECT_EQ(registry.find(TRIAX_PLUGIN_OPTIMIZER, "test_sgd").version, "1.2.3");
}

TEST(PluginRegistry, ScanFolderKeepsTheGoodAndCollectsRefusals) {
  PluginRegistry registry;
  registry.scan_folder(folder("good"));
  registry.scan_folder(folder("broken"));
  registry.scan_folder(folder("duplicate"));
  registry.scan_folder(folder("broken"));  // a folder listed twice is not a new refusal

  EXPECT_EQ(registry.plugins().size(), 2u);
  EXPECT_NO_THROW(registry.optimizer("test_sgd"));

  std::vector<std::string> refused;
  for (const triax::PluginRefusal& r : registry.refusals()) refused.push_back(r.library_path);
  const std::vector<std::string> expected = {broken_library("bad_sharding"), broken_library("missing_entry"),
                                             broken_library("null_vtable"),  broken_library("unknown_kind"),
                                             broken_library("wrong_abi"),    broken_library("wrong_cxx_abi"),
                                             broken_library("wrong_torch"),  duplicate_library()};
  EXPECT_EQ(refused, expected);  // sorted within a folder, folders in scan order
  EXPECT_CONTAINS(registry.refusals().back().reason, good_library());

  const std::vector<std::string> searched = {folder("good"), folder("broken"), folder("duplicate")};
  EXPECT_EQ(registry.searched_folders(), searched);
}

TEST(PluginRegistry, ScanFolderReportsAMissingFolder) {
  PluginRegistry registry;
  registry.scan_folder(kPluginsDir + "/no_such_folder");
  ASSERT_EQ(registry.refusals().size(), 1u);
  EXPECT_CONTAINS(registry.refusals()[0].library_path, "no_such_folder");
  EXPECT_CONTAINS(registry.refusals()[0].reason, "does not exist");
}

TEST(PluginRegistry, UnknownNameListsTheAvailableOnes) {
  PluginRegistry registry;
  registry.scan_folder(folder("good"));
  try {
    registry.optimizer("adamx");
    FAIL() << "unknown name found";
  } catch (const PluginError& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown optimizer plugin 'adamx'; available optimizer plugins: test_sgd "
              "(searched: " +
                  folder("good") + ")");
  }

  // A name of another kind says so; refused libraries are listed, as they may be the reason.
  registry.scan_folder(folder("broken"));
  try {
    registry.model("test_sgd");
    FAIL() << "optimizer found as a model";
  } catch (const PluginError& e) {
    const std::string message = e.what();
    EXPECT_CONTAINS(message, "unknown model plugin 'test_sgd'; available model plugins: none (searched: ");
    EXPECT_CONTAINS(message, "'test_sgd' is registered as a plugin of kind optimizer");
    EXPECT_CONTAINS(message, "refused libraries: " + broken_library("bad_sharding") + ": optimizer plugin");
    EXPECT_CONTAINS(message, broken_library("missing_entry") + ": no entry symbol");
  }
}

TEST(PluginRegistry, HonoursTriaxPluginPath) {
  TempFolder empty;
  const std::string missing = kPluginsDir + "/not_there";
  const std::string value = empty.str() + "::" + folder("good") + ":" + missing + ":";
  ScopedPluginPath scoped(value.c_str());

  const std::vector<std::string> paths = PluginRegistry::default_search_paths();
  ASSERT_GE(paths.size(), 3u);
  const std::vector<std::string> tail(paths.end() - 3, paths.end());
  EXPECT_EQ(tail, (std::vector<std::string>{empty.str(), folder("good"), missing}));

  PluginRegistry registry;
  registry.scan_search_paths({folder("broken")});
  EXPECT_EQ(registry.find(TRIAX_PLUGIN_OPTIMIZER, "test_sgd").library_path, good_library());
  EXPECT_EQ(registry.searched_folders().back(), folder("broken"));
  bool missing_reported = false;
  for (const auto& r : registry.refusals()) missing_reported |= r.library_path == missing;
  EXPECT_TRUE(missing_reported);
}

TEST(PluginRegistry, DefaultSearchPathsStartNextToTheExecutable) {
  ScopedPluginPath scoped(nullptr);
  const fs::path bin = fs::read_symlink("/proc/self/exe").parent_path();
  std::vector<std::string> expected;
  for (const fs::path& candidate : {bin / ".." / "plugins", bin / ".." / TRIAX_PLUGIN_INSTALL_DIR})
    if (fs::is_directory(candidate)) expected.push_back(fs::canonical(candidate).string());
  EXPECT_EQ(PluginRegistry::default_search_paths(), expected);
}

// Run by the `out_of_tree_plugin` ctest (tests/out_of_tree_plugin/run_test.cmake), which builds
// a plugin against the installed SDK and points TRIAX_OUT_OF_TREE_PLUGIN_DIR at it.
TEST(OutOfTreePlugin, IsAcceptedAndSteps) {
  const char* dir = std::getenv("TRIAX_OUT_OF_TREE_PLUGIN_DIR");
  if (dir == nullptr) GTEST_SKIP() << "run by the out_of_tree_plugin ctest";
  PluginRegistry registry;
  registry.scan_folder(dir);
  for (const auto& r : registry.refusals()) ADD_FAILURE() << r.library_path << ": " << r.reason;
  const triax_optimizer_vtable& vtable = registry.optimizer("oot_sgd");

  at::Tensor param = at::tensor({1.0f, -1.0f});
  at::Tensor grad = at::tensor({2.0f, 4.0f});
  triax_optimizer_param p{"w", triax::borrow_handle(param), 0.0, 0};
  triax_optimizer_context context{};
  context.struct_size = sizeof(context);
  context.dp_size = 1;
  triax_optimizer* optimizer = nullptr;
  triax_error error{};
  ASSERT_EQ(vtable.create(&context, &p, 1, &optimizer, &error), TRIAX_OK) << error.message;
  triax_tensor* grads[] = {triax::borrow_handle(grad)};
  ASSERT_EQ(vtable.step(optimizer, grads, 1, 0.5, &error), TRIAX_OK) << error.message;
  EXPECT_TRUE(at::allclose(param, at::tensor({0.0f, -3.0f}))) << param;
  vtable.destroy(optimizer);
}
