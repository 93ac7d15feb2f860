// Logits of a model whose weights come from a triax checkpoint or a Hugging Face folder, on one
// process, for the interop checks against transformers (hf_logits_test.py).
//
//   triax_logits --weights PATH --tokens "1 2 3 ..." --out FILE
//
// Writes FILE: int64 rows, int64 vocab, then rows x vocab float32 logits (the vocabulary's
// meaningful part, padding cut off). The weights load through model.init_method.path's code.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "triax/config_reader.hpp"
#include "triax/convert/hf_model_format.hpp"
#include "triax/convert/hf_weights.hpp"
#include "triax/core/checkpoint/checkpoint_reader.hpp"
#include "triax/core/checkpoint/training_checkpoint.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/interop/hf_folder.hpp"
#include "triax/tensor_handle.hpp"

int main(int argc, char** argv) {
  using namespace triax;
  std::map<std::string, std::string> options;
  for (int i = 1; i + 1 < argc; i += 2) options[argv[i]] = argv[i + 1];
  if (!options.count("--weights") || !options.count("--tokens") || !options.count("--out")) {
    std::cerr << "usage: triax_logits --weights PATH --tokens \"1 2 3\" --out FILE\n";
    return 2;
  }
  try {
    at::set_num_threads(1);
    const std::string weights = options["--weights"];
    PluginRegistry registry;
    registry.scan_search_paths({TRIAX_TEST_PLUGIN_DIR});  // and TRIAX_PLUGIN_PATH (out-of-tree plugins)
    // The model as the folder describes it: config.json through its plugin, or the checkpoint's config.
    std::string plugin;
    YAML::Node model_config;
    if (interop::is_hf_folder(weights)) {
      const checkpoint::HfModel hf = checkpoint::read_hf_model(registry, weights);
      plugin = hf.plugin;
      model_config = YAML::Load(hf.model_config_yaml);
    } else {
      const YAML::Node config = YAML::Load(checkpoint::CheckpointReader(weights).resolved_config());
      plugin = config["model"]["plugin"].as<std::string>();
      model_config = config["model"]["model_config"];
    }
    const std::string model_yaml = to_yaml_text(model_config);
    std::vector<int64_t> tokens;
    std::istringstream token_text(options["--tokens"]);
    for (int64_t t; token_text >> t;) tokens.push_back(t);

    const triax_model_vtable& vtable = registry.model(plugin);
    const auto blocks = ModelInstance::describe_blocks(vtable, plugin, model_yaml, static_cast<int64_t>(tokens.size()));
    SingleProcessCommunicator alone;
    HostServices host(alone);
    triax_model_context context{};
    context.struct_size = sizeof(context);
    context.tp_size = context.pp_size = context.dp_size = 1;
    context.first_block = 0;
    context.last_block = static_cast<int32_t>(blocks.size());
    context.device = "cpu";
    context.dtype = "float32";
    context.seed = 1;
    context.init_method_yaml = "{}";  // every model's defaults: the weights are loaded over them
    context.make_vocab_size_divisible_by = 1;
    context.host = host.c_host();
    ModelInstance model(vtable, plugin, model_yaml, context);
    const HfModelFormat hf_folders;
    checkpoint::load_initial_weights(weights, model.parameters(), alone, c10::Device(c10::kCPU), registry, plugin,
                                     &hf_folders);
    model.set_training(false);

    at::Tensor input = at::tensor(tokens, at::kLong).unsqueeze(0);
    triax_stage_io io{};
    io.struct_size = sizeof(io);
    io.input_ids = borrow_handle(input);
    io.want_logits = 1;
    triax_error error{};
    at::NoGradGuard no_grad;
    const triax_status status = vtable.forward(model.ref().model, &io, &error);
    if (status != TRIAX_OK) throw std::runtime_error(error.message);
    at::Tensor logits = adopt_handle(io.logits);
    adopt_handle(io.hidden_out);
    adopt_handle(io.loss);
    adopt_handle(io.aux_loss);
    const int64_t vocab = ModelInstance::vocab_size(vtable, plugin, model_yaml);
    logits = logits[0].narrow(1, 0, vocab).to(at::kFloat).contiguous();
    std::ofstream out(options["--out"], std::ios::binary);
    const int64_t header[2] = {logits.size(0), logits.size(1)};
    out.write(reinterpret_cast<const char*>(header), sizeof(header));
    out.write(static_cast<const char*>(logits.data_ptr()), static_cast<std::streamsize>(logits.nbytes()));
    return out ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "triax_logits: " << e.what() << "\n";
    return 1;
  }
}
