"""The output directory of a search: what it holds, how a rerun clears it, and the
``DONE.json`` manifest that says it is finished."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from drafts_ops.core.atomic import write_json_atomic
from drafts_ops.core.errors import ParameterError
from drafts_ops.core.perf import PERF_FILENAME
from drafts_ops.search.config import PathLike

WORK_DIR = "work"

# -- the output directory ----------------------------------------------------------------

#: Written last by a search: every output with its size and checksum. Its presence says
#: the directory holds one finished search; a directory without it is unfinished.
DONE_FILE = "DONE.json"
#: What a search writes into its output directory (replaced by the next search there).
PRODUCTS = ("candidates.csv", "*.cand", "h5", "plots", PERF_FILENAME, WORK_DIR, "blocks",
            "report.html")  # fmt: skip


def prepare_output_dir(out: Path) -> None:
    """Check that ``out`` can be written, then clear what an earlier search left there.

    :data:`DONE_FILE` goes first (the directory is unfinished from then on), then the
    earlier products (:data:`PRODUCTS`) and temporary files of a killed writer, so a rerun
    into the same directory replaces the previous run's outputs instead of mixing with
    them. Anything else in the directory is left alone.
    """

    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".drafts-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        reason = os.strerror(err.errno) if err.errno else str(err)
        raise ParameterError(f"{out}: cannot write the output directory ({reason})") from None
    (out / DONE_FILE).unlink(missing_ok=True)
    for pattern in (*PRODUCTS, ".*.tmp"):
        for path in out.glob(pattern):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def write_manifest(out: Path, files: Sequence[Path]) -> Path:
    """Write :data:`DONE_FILE` listing ``files`` (relative paths, bytes, sha256)."""

    entries = {}
    for path in sorted({Path(p) for p in files}):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        entries[path.relative_to(out).as_posix()] = {"bytes": path.stat().st_size,
                                                     "sha256": digest}  # fmt: skip
    doc = {"schema": "drafts-ops/search-output", "schema_version": 1, "complete": True,
           "finished_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "files": entries}  # fmt: skip
    return write_json_atomic(out / DONE_FILE, doc)


def is_complete(out: PathLike) -> bool:
    """Whether ``out`` holds a finished search whose files match its manifest (sizes)."""

    try:
        doc = json.loads((Path(out) / DONE_FILE).read_text())
        return all((Path(out) / name).stat().st_size == meta["bytes"]
                   for name, meta in doc["files"].items())  # fmt: skip
    except (OSError, ValueError, KeyError):
        return False
