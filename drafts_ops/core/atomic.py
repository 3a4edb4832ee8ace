"""Atomic file writes: write to a temporary file beside the target, then rename.

A crash or an exception never leaves a half-written file under the final name.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path in the target's directory; rename it to ``path`` on success.

    The parent directory is created if needed. On an exception the temporary file is
    removed and the target is left as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        tmp.chmod(0o666 & ~_current_umask())  # mkstemp makes 0600; give the usual mode
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as indented JSON to ``path`` atomically."""
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
