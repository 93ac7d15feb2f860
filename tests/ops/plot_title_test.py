"""tools/plot's loss panel names the dotted validation line only when a run has validation lines
(val_loss in its metrics.jsonl): a run without validation gets the plain title and no such line.

  plot_title_test.py <source dir>
"""
import importlib.machinery
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

SRC = Path(sys.argv[1])


def load_plot():
    loader = importlib.machinery.SourceFileLoader("plot", str(SRC / "tools" / "plot"))
    spec = importlib.util.spec_from_loader("plot", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def write_run(folder, validated):
    folder.mkdir()
    lines = [{"step": s, "loss": 5.0 - 0.1 * s, "lr": 1e-3, "tokens_per_s": 1000.0} for s in range(1, 5)]
    if validated:
        lines.insert(2, {"step": 2, "val_loss": 4.9, "val_ppl": 134.3})
        lines.append({"step": 4, "val_loss": 4.7, "val_ppl": 109.9})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder / "metrics.jsonl"


def loss_panel(plot, paths):
    figure = plot.draw(paths)
    return figure.axes[0]


def check(what, condition):
    if not condition:
        sys.exit(f"FAIL: {what}")
    print(f"ok: {what}")


plot = load_plot()
with tempfile.TemporaryDirectory() as work:
    plain = write_run(Path(work) / "plain", validated=False)
    validated = write_run(Path(work) / "validated", validated=True)

    axes = loss_panel(plot, [plain])
    check("a run without validation: title 'training loss'", axes.get_title() == "training loss")
    check("a run without validation: no dotted line", all(l.get_linestyle() != ":" for l in axes.get_lines()))

    axes = loss_panel(plot, [validated])
    check("a run that validated: the title names the dotted validation line",
          axes.get_title() == "training loss (dotted: validation loss)")
    check("a run that validated: one dotted line", sum(l.get_linestyle() == ":" for l in axes.get_lines()) == 1)

    axes = loss_panel(plot, [plain, validated])
    check("two runs, one validated: the title names the dotted validation line",
          axes.get_title() == "training loss (dotted: validation loss)")
