"""tools/layering.py on a small tree: an include up the core's folders, one from a library below
the core, and the allowed ones."""
import pathlib
import subprocess
import sys
import tempfile

TOOL = pathlib.Path(sys.argv[1]) / "tools" / "layering.py"


def write(root, path, text):
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)


def run(root):
    done = subprocess.run([sys.executable, str(TOOL), str(root)], capture_output=True, text=True)
    return done.returncode, done.stdout


with tempfile.TemporaryDirectory() as folder:
    root = pathlib.Path(folder)
    write(root, "core/src/train/loop.cpp", '#include "step/engine_step.hpp"\n#include "triax/config/train_config.hpp"\n')
    write(root, "core/src/step/engine_step.hpp", '#include "gradients/step_gradients.hpp"\n')
    write(root, "data/src/source.cpp", '#include "triax/config/train_config.hpp"\n')
    status, out = run(root)
    assert status == 0 and out == "", (status, out)

    write(root, "core/src/step/engine_step.cpp", '#include "train/step_logger.hpp"\n')
    write(root, "core/include/triax/core/comm/communicator.hpp", '#include "triax/core/trainer.hpp"\n')
    write(root, "report/src/metrics.cpp", '#include "triax/core/plugins/plugin_registry.hpp"\n')
    write(root, "core/src/train/run.cpp", '#include "triax/comm/launch_environment.hpp"\n')
    write(root, "config/src/tokens_section.cpp", '#include "triax/core/device.hpp"\n')
    status, out = run(root)
    lines = out.splitlines()
    assert status == 1, (status, out)
    assert len(lines) == 5, out
    assert any("core/src/step/engine_step.cpp:1:" in l and "core/step may not include core/train" in l for l in lines), out
    assert any("communicator.hpp:1:" in l and "core/comm may not include core/train" in l for l in lines), out
    assert any("report/src/metrics.cpp:1:" in l and "report/ sits below the core" in l for l in lines), out
    assert any("core/src/train/run.cpp:1:" in l and "comm/" in l for l in lines), out
    assert any("config/src/tokens_section.cpp:1:" in l and "config/ sits below the core" in l for l in lines), out
# parallel/ sits over the core's mesh: it includes core/comm only, and only the folders after comm
# include it. convert/ sits above the core. Each include below, and what the checker says of it.
LIBRARIES_BESIDE = [
    ("parallel/src/norm.cpp", "triax/core/comm/communicator.hpp", None),
    ("core/src/gradients/step.hpp", "triax/parallel/norm.hpp", None),
    ("parallel/src/ownership.cpp", "triax/core/plugins/plugin_registry.hpp", "may include only core/comm"),
    ("core/src/comm/mesh.cpp", "triax/parallel/norm.hpp", "core/comm may not include parallel/"),
    ("data/src/source.cpp", "triax/parallel/norm.hpp", "data/ sits below the core"),
    ("device/src/memory.cpp", "triax/core/plugins/external_model_format.hpp", "device/ sits below the core"),
    ("core/src/checkpoint/store.cpp", "triax/convert/hf_conversion.hpp", "convert/, which sits above it"),
    ("core/src/plugins/choice.cpp", "triax/interop/hf_folder.hpp", "Hugging Face folders only through convert/"),
    ("convert/src/format.cpp", "triax/interop/hf_folder.hpp", None),
]
with tempfile.TemporaryDirectory() as folder:
    root = pathlib.Path(folder)
    for path, include, _ in LIBRARIES_BESIDE:
        write(root, path, f'#include "{include}"\n')
    status, out = run(root)
    lines = out.splitlines()
    refused = [(path, why) for path, _, why in LIBRARIES_BESIDE if why]
    assert status == 1 and len(lines) == len(refused), (status, out)
    for path, why in refused:
        assert any(f"{path}:1:" in l and why in l for l in lines), (path, out)
print("layering checker: 3 trees checked")
