// The command line of the fp8 benches (fp8_linear_bench, fp8_cast_bench): the models named, or
// every model of the table when none is, each shape of a named model reported in table order.
#pragma once

#include <ATen/Context.h>

#include <cstdio>
#include <string>
#include <vector>

namespace triax::bench {

// The title line, then report(shape) for every shape (each with a `model` name) of the models
// named in argv[1..], `all_models` when none is. Returns main's exit code: 1 without a GPU, 2 for
// an unknown model.
template <typename Shape, size_t N, typename Report>
int report_models(int argc, char** argv, const char* bench, const char* title,
                  const std::vector<std::string>& all_models, const Shape (&shapes)[N], Report report) {
  if (!at::hasCUDA()) {
    std::fprintf(stderr, "%s needs a GPU\n", bench);
    return 1;
  }
  std::printf("%s\n", title);
  std::vector<std::string> models(argv + 1, argv + argc);
  if (models.empty()) models = all_models;
  for (const std::string& model : models) {
    bool known = false;
    for (const Shape& shape : shapes)
      if (model == shape.model) {
        known = true;
        report(shape);
      }
    if (!known) {
      std::string names;
      for (const std::string& name : all_models) names += (names.empty() ? "" : ", ") + name;
      std::fprintf(stderr, "unknown model '%s' (%s)\n", model.c_str(), names.c_str());
      return 2;
    }
  }
  return 0;
}

}  // namespace triax::bench
