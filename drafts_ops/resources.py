"""Where the shipped demo data and ONNX models are, for a checkout or an installed package.

In a source checkout they are the top-level ``data/`` and ``models/`` folders; an installed
wheel puts copies under ``<prefix>/share/drafts-ops/`` (see ``pyproject.toml``). The
environment variables ``DRAFTS_OPS_DATA`` and ``DRAFTS_OPS_MODELS`` override both.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

from drafts_ops.errors import DraftsError, ParameterError

_CHECKOUT = Path(__file__).resolve().parents[1]


def _candidates(kind: str) -> list[Path]:
    env = os.environ.get(f"DRAFTS_OPS_{kind.upper()}")
    found = [Path(env)] if env else []
    found.append(_CHECKOUT / kind)
    for prefix in {sys.prefix, sysconfig.get_paths()["data"]}:
        found.append(Path(prefix) / "share" / "drafts-ops" / kind)
    return found


def resource_dir(kind: str) -> Path:
    """The first existing folder for ``kind`` (``"data"`` or ``"models"``)."""
    if kind not in ("data", "models"):
        raise ParameterError(f"unknown resource kind {kind!r} (use 'data' or 'models')")
    for folder in _candidates(kind):
        if folder.is_dir():
            return folder
    searched = ", ".join(str(p) for p in _candidates(kind))
    raise DraftsError(f"drafts-ops {kind} folder not found (looked in {searched})")


def resource_path(kind: str, name: str) -> Path:
    """Path of a shipped file, e.g. ``resource_path("models", "classifier.onnx")``."""
    path = resource_dir(kind) / name
    if not path.exists():
        raise DraftsError(f"shipped file {name!r} not found in {path.parent}")
    return path
