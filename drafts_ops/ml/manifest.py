"""The model manifest: ``models/manifest.json`` records the sha256 of every shipped model.

Inference refuses a model file whose hash differs from the manifest, so a truncated
download or a stale file is a clear :class:`~drafts_ops.core.errors.ModelError`, not a silent
wrong answer.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from drafts_ops.core.atomic import write_json_atomic
from drafts_ops.core.errors import ModelError

MANIFEST_NAME = "manifest.json"


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The manifest of a model folder (``{"models": {name: {"sha256": ..., ...}}}``)."""
    path = Path(folder) / MANIFEST_NAME
    if not path.is_file():
        raise ModelError(f"{path}: model manifest not found")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ModelError(f"{path}: unreadable model manifest ({err})") from err
    if not isinstance(manifest, dict) or not isinstance(manifest.get("models"), dict):
        raise ModelError(f"{path}: model manifest has no 'models' table")
    return manifest


def update_manifest(folder: str | Path, name: str, **info: Any) -> Path:
    """Record (or replace) the entry of model file ``name`` in ``folder``'s manifest.

    The sha256 is computed from the file; ``info`` adds free metadata (training steps,
    seed, input shapes, ...).
    """
    folder = Path(folder)
    try:
        manifest = read_manifest(folder)
    except ModelError:
        manifest = {"models": {}}
    manifest["models"][name] = {"sha256": sha256_file(folder / name), **info}
    return write_json_atomic(folder / MANIFEST_NAME, manifest)


def verify_model(path: str | Path) -> Path:
    """Check that ``path`` exists and matches the sha256 in its folder's manifest."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(
            f"{path}: model file not found (reinstall drafts-ops or run 'drafts train')"
        )
    entry = read_manifest(path.parent)["models"].get(path.name)
    if entry is None:
        raise ModelError(f"{path}: not listed in {path.parent / MANIFEST_NAME}")
    actual = sha256_file(path)
    if actual != entry.get("sha256"):
        raise ModelError(
            f"{path}: sha256 {actual[:12]}... does not match the manifest "
            f"({str(entry.get('sha256'))[:12]}...): the file is corrupt or stale"
        )
    return path
