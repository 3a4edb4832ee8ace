"""Where the shipped files are, for a checkout or an installed package.

Three kinds: ``data`` (demo observation), ``models`` (ONNX files, manifest, model card) and
``deploy`` (Prefect deployments, Dask settings). In a source checkout they are the
top-level folders of those names; an installed wheel puts copies under
``<prefix>/share/drafts-ops/`` (see ``pyproject.toml``). The environment variables
``DRAFTS_OPS_DATA``, ``DRAFTS_OPS_MODELS`` and ``DRAFTS_OPS_DEPLOY`` override both.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

from drafts_ops.core.errors import DraftsError, ParameterError

_CHECKOUT = Path(__file__).resolve().parents[2]
#: The kinds of shipped files.
RESOURCE_KINDS = ("data", "models", "deploy")


def _candidates(kind: str) -> list[Path]:
    env = os.environ.get(f"DRAFTS_OPS_{kind.upper()}")
    found = [Path(env)] if env else []
    if (_CHECKOUT / "pyproject.toml").is_file():  # a source checkout, not site-packages
        found.append(_CHECKOUT / kind)
    for prefix in dict.fromkeys((sys.prefix, sysconfig.get_paths()["data"])):
        found.append(Path(prefix) / "share" / "drafts-ops" / kind)
    return found


def resource_dir(kind: str) -> Path:
    """The first existing folder for ``kind`` (one of :data:`RESOURCE_KINDS`)."""
    if kind not in RESOURCE_KINDS:
        raise ParameterError(f"unknown resource kind {kind!r} (use one of {RESOURCE_KINDS})")
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
