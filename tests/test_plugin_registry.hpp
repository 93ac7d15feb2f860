// The plugins this build made (TRIAX_TEST_PLUGIN_DIR), scanned once per test process: what the
// in-process training tests build their models, engines and optimizers from.
#pragma once

#include "triax/core/plugins/plugin_registry.hpp"

namespace triax::testing {

inline PluginRegistry& test_plugin_registry() {
  static PluginRegistry instance;
  static const bool scanned = (instance.scan_folder(TRIAX_TEST_PLUGIN_DIR), true);
  (void)scanned;
  return instance;
}

}  // namespace triax::testing
