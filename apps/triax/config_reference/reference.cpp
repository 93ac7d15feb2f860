// The reference's text around the tables (strict parsing, overrides, the resolved configuration,
// types; the checks made at launch), and the reference assembled from its section tables.
#include "reference_tables.hpp"

namespace triax::config_reference {
namespace {

constexpr const char* kPreamble = R"md(# Configuration reference

triax reads nanotron's YAML training configuration: a config written for nanotron (for example
the configs of nanotron's `examples/` folder) loads as it is. triax adds a few keys of its own
(plugin names, plugin folders, communication backend, device, MFU basis); they are marked
**triax** below. Everything else is nanotron's key, with nanotron's meaning and default unless a
note says otherwise.

This file is generated from the reference the loader carries (`apps/triax/config_reference/`):
`triax config-reference > docs/config-reference.md`. Each default below is the value the loader
records for a config that leaves the key out. The tests fail when the two drift:
`config_reference_test` tries every key on the loader (a key read but not documented, documented
but not read, a bound, choice, required key or default that differs) and
`config_reference.docs_current` compares this file with the generated one.

```
triax train --config run.yaml [--set KEY.PATH=VALUE]...
triax train --config-file run.yaml ...     # nanotron's run_train.py flag, the same
triax train --print-run-folder --config run.yaml    # prints checkpoints.checkpoints_path, for scripts
```

## Strict parsing

The whole file is checked before any work starts (no process group, no model, no data):

- an **unknown key**, at any depth, is an error that lists the keys that are known there
  (a misspelt required key is reported as unknown, not as missing);
- a value of the **wrong type** (`clip_grad: abc`, `micro_batch_size: 1.5`, `dp: [2]`) is an error;
- a **missing required key** is an error;
- an **impossible value or combination** is an error: a size or count below its minimum, a
  choice outside its set, a size too large for a tensor or for this machine's memory, a data
  stage schedule without a stage at step 1, `dp·tp·pp` different from the number of processes,
  and so on;
- the file itself must be one YAML document (a second one after `---` is an error) with every
  key once per mapping (a **duplicate key** is an error naming both lines), every quoted string
  closed, no alias that contains itself, and at most 64 levels of nesting.

Every message starts with the file name, then the key's full path and, for values that come
from the file, its line, then what was expected:

```
run.yaml: optimizer.clip_grad (line 12): expected a number, got 'abc'
run.yaml: tokens.train_step (line 30): unknown key (expected one of: sequence_length, train_steps, ...)
run.yaml: parallelism.dp (2) x parallelism.tp (2) x parallelism.pp (2) = 8, but the world size is 1; dp*tp*pp must equal the number of processes
```

`triax` exits with status **2** on any configuration error (and prints the message); other
failures use other codes.

Sections read by a plugin (`model.model_config`, `model.init_method`,
`optimizer.optimizer_factory`, and a data stage's `dataset`) are passed to that plugin or
component as YAML, and it reads them just as strictly with the same message format, the file's
name and line included (the YAML handed over carries them in trailing comments). An unknown plugin
name exits with status **3**, naming the file and the key (`model.plugin`,
`parallelism.pp_engine` or `optimizer.optimizer_factory.name`) and listing the plugins found.

`triax train --check --config run.yaml` checks the file, the plugins it names and the sections
they read, as a run does before any work, and exits (0, or the status of the error) without
building the model: what depends on the launch (the world size, heads divisible by `tp`,
layers per pipeline stage), `model.init_method` (the model plugin reads it as it builds the
model) and the data files are checked when the run starts. Nothing is written
before a run's config and plugins are accepted: a refused run leaves no run folder.

## Overrides

`--set KEY.PATH=VALUE` changes one value after the file is read and before it is checked; it
can be repeated and the overrides apply in order.

- `KEY.PATH` is the dotted path of the key: `--set optimizer.clip_grad=0.5`.
- A numeric part indexes a list: `--set data_stages.0.data.seed=7`. The index must exist.
- Missing mappings on the way are created (`--set general.device=cpu` works without a
  `general` section); a key that does not exist in the schema is then reported as unknown,
  like a key in the file.
- `VALUE` is parsed as YAML: `20` is an integer, `3.0e-4` a number, `true` a boolean, `null`
  clears an optional value, `[a, b]` is a list, `{name: adamW, adam_eps: 1.0e-8}` a mapping.
  Quote values that YAML reads specially: `--set "general.run='%date_test'"` (a bare `%` starts a
  YAML directive).
- A malformed override (`--set tokens.train_steps` without `=`, an empty key, a list index out
  of range, a value that is not valid YAML) is a configuration error naming the file and the
  override.

## The resolved configuration

After loading, triax holds the configuration **as the run uses it**: every key of every section,
with the defaults filled in, including the values nanotron derives from others (`run` with
`%date`/`%jobid` expanded, `lr_decay_steps`, `lr_decay_starting_step`, `min_decay_lr`, the
default run folder, the default data stage) and names normalised (`dtype: torch.float32` →
`float32`, `tp_mode: reduce_scatter` → `REDUCE_SCATTER`). It is saved with the run and is itself
a valid config that loads to the same values.

## Sections

Types: *int* is an integer (`1.5` is refused), *number* any finite number, *bool* is
`true`/`false`, *string*, *list*, *mapping*; *null*: only `null` is accepted. "—" in the default
column means required. A section shown as optional may be absent or `null`; all its keys then
take their defaults.)md";

constexpr const char* kClosing = R"md(## Checked at launch

Once the number of processes is known: `parallelism.dp · tp · pp` must equal it, and
`parallelism.expert_parallel_size` must divide `parallelism.dp`. The model plugin checks its own
combinations when it reads `model_config` (for example attention heads divisible by `tp`).)md";

}  // namespace

const Reference& reference() {
  static const Reference instance = [] {
    Reference r;
    r.preamble = kPreamble;
    r.sections = run_sections();
    for (Section& s : training_sections()) r.sections.push_back(std::move(s));
    r.closing = kClosing;
    return r;
  }();
  return instance;
}

}  // namespace triax::config_reference
