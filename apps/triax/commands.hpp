// The subcommands of the `triax` command line. Each takes the arguments that follow its name
// (`triax plugins --path DIR` passes {"--path", "DIR"}) and returns the process exit status:
// 0 success, 1 runtime failure, 2 invalid configuration or usage, 3 plugin refused or unknown,
// 4 communication failure (a peer died, hung or timed out).
#pragma once

#include <string>
#include <vector>

namespace triax::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitInvalidConfig = 2;
constexpr int kExitPluginError = 3;
constexpr int kExitCommunication = 4;

// `triax train --config FILE [--set KEY=VALUE]... [--plugin-path DIR]...`
int run_train_command(const std::vector<std::string>& args);

// `triax plugins [--path DIR]...`: lists the plugins found in the default search paths and the
// given folders (kind, name, version, description, library), then the refused libraries.
int run_plugins_command(const std::vector<std::string>& args);

// `triax config-reference [--check FILE]`: the configuration reference, generated from the loader's.
int run_config_reference_command(const std::vector<std::string>& args);

// `triax launch -n N [--comm-timeout S] -- COMMAND...`: starts N local ranks of COMMAND under
// mpirun and returns non-zero when any of them failed.
int run_launch_command(const std::vector<std::string>& args);

// `triax inspect mesh --dp D --tp T --pp P [--ep E]`: the rank table and every process group.
int run_inspect_command(const std::vector<std::string>& args);
// `triax convert --to hf CHECKPOINT OUT` / `triax convert --from hf HF_FOLDER OUT`.
int run_convert_command(const std::vector<std::string>& args);

// `triax generate MODEL --prompt TEXT | --prompt-ids IDS ...`: text from a checkpoint, a Hugging
// Face folder or a config (command_generate.cpp describes the options).
int run_generate_command(const std::vector<std::string>& args);

// One intra-op thread per core unless OMP_NUM_THREADS says otherwise (LibTorch's own default
// can be a single thread on small machines).
void configure_threads();

// `triax inspect checkpoint PATH`: step, topology, tensors, checksums verified.
int inspect_checkpoint(const std::vector<std::string>& args);

// `triax inspect schedule [--pp P]... [--micro-batches M]... [--forward F ...] [--measure CONFIG]`:
// every pipeline engine's simulated step, bubble and activations in flight (inspect_schedule.cpp).
int inspect_schedule_command(const std::vector<std::string>& args);

}  // namespace triax::cli
