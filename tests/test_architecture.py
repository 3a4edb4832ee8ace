"""The code's shape a newcomer relies on: modules readable in one sitting, and a command
line that starts without loading the heavy libraries a command may never use (the layers
themselves are checked by ``lint-imports``, pyproject.toml)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "drafts_ops"
#: Longest module (lines): one concern, read in one sitting.
MAX_MODULE_LINES = 650


def test_no_module_is_a_god_module():
    sizes = {p.relative_to(PACKAGE).as_posix(): len(p.read_text().splitlines())
             for p in PACKAGE.rglob("*.py")}  # fmt: skip
    too_long = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not too_long, too_long
    assert not (PACKAGE / "pipeline.py").exists() and not (PACKAGE / "evaluation.py").exists()


def test_the_help_loads_no_heavy_library():
    """``drafts --help`` builds every sub-command's parser (the flow commands' included)
    without importing Prefect, matplotlib, ONNX Runtime, PyTorch or the simulator's
    renderer (its Numba kernels: ~0.2 s that a search never uses)."""
    code = ("import json, sys; from drafts_ops.cli import build_parser; build_parser(); "
            "print(json.dumps(sorted(m for m in ('prefect', 'matplotlib', 'onnxruntime', "
            "'torch', 'dask', 'drafts_ops.simulate.render_kernels') "
            "if m in sys.modules)))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)  # fmt: skip
    assert json.loads(done.stdout) == []


def test_every_command_prints_its_help(capsys):
    """Each sub-command's --help renders (a '%' in an option's help once broke it)."""
    import argparse

    from drafts_ops.cli import build_parser, main

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in sub.choices:
        with pytest.raises(SystemExit) as stop:
            main([name, "--help"])
        assert stop.value.code == 0, name
        assert "usage: drafts " + name in capsys.readouterr().out
