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
with tempfile.TemporaryDirectory() as folder:
    # parallel/ sits over the core's mesh: it includes core/comm only, and only the folders after
    # comm include it. convert/ sits above the core.
    root = pathlib.Path(folder)
    write(root, "parallel/src/norm.cpp", '#include "triax/core/comm/communicator.hpp"\n')
    write(root, "core/src/gradients/step.hpp", '#include "triax/parallel/norm.hpp"\n')
    status, out = run(root)
    assert status == 0 and out == "", (status, out)

    write(root, "parallel/src/ownership.cpp", '#include "triax/core/plugins/plugin_registry.hpp"\n')
    write(root, "core/src/comm/mesh.cpp", '#include "triax/parallel/norm.hpp"\n')
    write(root, "data/src/source.cpp", '#include "triax/parallel/norm.hpp"\n')
    write(root, "core/src/checkpoint/store.cpp", '#include "triax/convert/hf_conversion.hpp"\n')
    status, out = run(root)
    lines = out.splitlines()
    assert status == 1 and len(lines) == 4, (status, out)
    assert any("core/src/checkpoint/store.cpp:1:" in l and "convert/, which sits above it" in l for l in lines), out
    assert any("parallel/src/ownership.cpp:1:" in l and "may include only core/comm" in l for l in lines), out
    assert any("core/src/comm/mesh.cpp:1:" in l and "core/comm may not include parallel/" in l for l in lines), out
    assert any("data/src/source.cpp:1:" in l and "data/ sits below the core" in l for l in lines), out
print("layering checker: 3 trees checked")
