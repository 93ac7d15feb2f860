"""Runs a tools/ script with the project's Python environment (.venv, made by tools/setup.sh).

The scripts start with `#!/usr/bin/env python3`, which may be a Python without the packages they
need. Which environment a Python runs is its sys.prefix, not its path: a virtual environment's
bin/python is a link to the base interpreter, so comparing resolved interpreter paths would take
the environment's Python for the base one and never switch.
"""
import os
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
VENV = PROJECT / ".venv"


def reexec_in_project_environment(script, needed):
    """Called when importing `needed` failed: re-runs `script` with the environment's Python, or
    exits with what to do when that is the Python already running (or there is none)."""
    python = VENV / "bin" / "python"
    if python.exists() and Path(sys.prefix).resolve() != VENV.resolve():
        os.execv(str(python), [str(python), os.path.abspath(script), *sys.argv[1:]])
    name = Path(script).name
    sys.exit(f"tools/{name} needs the Python packages {needed}: run tools/setup.sh")
