"""The built wheel ships the demo data, models and deployment files, and the installed
package finds them (drafts_ops.core.resources)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from drafts_ops.core import resources
from drafts_ops.core.errors import DraftsError

ROOT = Path(__file__).resolve().parents[1]
SHARE = "drafts_ops-0.1.0.data/data/share/drafts-ops"


def _build_wheel(tmp_path: Path) -> list[str]:
    """Names in a wheel built from a copy of the sources (the checkout stays untouched)."""
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for folder in ("drafts_ops", "flows", "data", "models", "deploy"):
        shutil.copytree(ROOT / folder, src / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    out = tmp_path / "wheel"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
           "--no-index", "-q", "-w", str(out), str(src)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("drafts_ops-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


def test_wheel_ships_data_models_and_deploy_files(tmp_path):
    names = set(_build_wheel(tmp_path))
    shipped = {n.removeprefix(SHARE + "/") for n in names if n.startswith(SHARE + "/")}
    onnx = {f"models/{p.name}" for p in (ROOT / "models").glob("*.onnx")}
    assert onnx >= {"models/classifier.onnx", "models/detector.onnx"}
    expected = onnx | {
        "models/manifest.json",
        "models/MODEL_CARD.md",
        "data/demo.fil",
        "data/demo.truth.csv",
        "deploy/prefect.yaml",
        "deploy/dask.yaml",
    }
    assert expected <= shipped, sorted(expected - shipped)
    assert {"drafts_ops/__init__.py", "drafts_ops/cli/__init__.py", "flows/__init__.py"} <= names
    assert not any(n.startswith("tests/") for n in names)


def test_installed_layout_is_found(tmp_path, monkeypatch):
    """Outside a checkout, files come from <prefix>/share/drafts-ops/<kind>/."""
    site = tmp_path / "site-packages"
    (site / "models").mkdir(parents=True)  # a stray top-level folder must not be taken
    prefix = tmp_path / "prefix"
    installed = prefix / "share" / "drafts-ops" / "models" / "classifier.onnx"
    installed.parent.mkdir(parents=True)
    installed.write_bytes(b"onnx")
    monkeypatch.setattr(resources, "_CHECKOUT", site)
    monkeypatch.setattr(sys, "prefix", str(prefix))
    monkeypatch.delenv("DRAFTS_OPS_MODELS", raising=False)
    assert resources.resource_path("models", "classifier.onnx") == installed
    with pytest.raises(DraftsError, match="data folder not found"):
        resources.resource_dir("data")
    monkeypatch.setenv("DRAFTS_OPS_DATA", str(ROOT / "data"))
    assert resources.resource_path("data", "demo.fil") == ROOT / "data" / "demo.fil"


def test_checkout_resources():
    assert resources.resource_path("models", "manifest.json") == ROOT / "models" / "manifest.json"
    assert resources.resource_path("deploy", "prefect.yaml") == ROOT / "deploy" / "prefect.yaml"
    with pytest.raises(DraftsError, match="unknown resource kind"):
        resources.resource_dir("weights")
