"""Science side of a survey: scan a directory, validate, quarantine, merge candidates.

No Prefect here; ``flows/survey.py`` wires these functions into a flow. Output layout of a
survey directory ``OUT``::

    OUT/ledger.json                  which files are done / failed / quarantined
    OUT/files/<key>/...              one search output directory per observation file
    OUT/quarantine/<name>            files that failed validation (moved here)
    OUT/quarantine/<name>.reason.txt why
    OUT/survey_candidates.csv        every file's candidates, with a ``key`` column
    OUT/survey_summary.json          the last run's summary

``survey_candidates.csv`` is rebuilt from the per-file candidate files after every run, so
reruns never duplicate a candidate and never lose one.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import errno
import fcntl
import io
import itertools
import json
import os
import shutil
import socket
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from drafts_ops.core.atomic import write_text_atomic
from drafts_ops.core.errors import DraftsError, ObservationError
from drafts_ops.detect.writers import read_csv
from drafts_ops.io import open_observation
from drafts_ops.io.header import Header
from drafts_ops.io.sequence import contiguity
from drafts_ops.survey.beams import beam_groups, coincidence, load_layout, write_group

LOCK_FILENAME = ".survey.lock"
QUARANTINE_DIR = "quarantine"
FILES_DIR = "files"
SURVEY_CANDIDATES = "survey_candidates.csv"
SURVEY_SUMMARY = "survey_summary.json"
#: Samples read at each end of a file by :func:`validate_observation`.
_PROBE_SAMPLES = 256


def scan(directory: str | os.PathLike[str], pattern: str = "*.fil") -> list[Path]:
    """Observation files under ``directory`` matching the glob ``pattern``, sorted.

    Hidden files (names starting with ``.``, e.g. partial uploads) are skipped.
    """
    root = Path(directory)
    if not root.is_dir():
        raise DraftsError(f"{root}: survey input is not a directory")
    return sorted(p for p in root.glob(pattern) if p.is_file() and not p.name.startswith("."))


class SurveyLockedError(DraftsError):
    """Another survey holds the output directory's lock."""


@contextlib.contextmanager
def survey_lock(out_dir: str | os.PathLike[str], *, wait: bool = False) -> Iterator[Path]:
    """Hold the survey lock of ``out_dir`` (``OUT/.survey.lock``) for the enclosed run.

    An OS-level lock (``flock``): one survey per output directory at a time. The holder
    writes its pid, host and start time into the file, so a second run can say who holds
    it; without ``wait`` that run raises :class:`SurveyLockedError`, with ``wait`` it blocks
    until the lock is free. A run killed in any way (kill -9 included) releases the lock
    with its process, so a stale lock file is simply taken over by the next run.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILENAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = _lock_holder(path)
            raise SurveyLockedError(
                f"{out} is being surveyed by {holder}; wait for it to finish or rerun with --wait"
            ) from None
        started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started_utc": started}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock


def _lock_holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
        return f"pid {info['pid']} on {info['host']} since {info['started_utc']}"
    except (OSError, ValueError, KeyError):
        return "another process"


def settled(path: Path, settle_s: float, now: float | None = None) -> bool:
    """Whether ``path`` has not changed for ``settle_s`` seconds (uploads in progress have)."""
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return False
    return (time.time() if now is None else now) - mtime >= settle_s


#: errno values of storage problems that retrying cannot mend (full, read-only, denied).
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


def storage_error(err: BaseException) -> str | None:
    """One line for a full, read-only or forbidden storage error (``None`` otherwise)."""
    if isinstance(err, OSError) and err.errno in STORAGE_ERRNOS:
        where = err.filename or "output"
        return f"cannot write {where}: {err.strerror or os.strerror(err.errno)}"
    return None


def file_key(path: Path, root: Path) -> str:
    """Ledger key of ``path``: its path relative to the scanned ``root`` (POSIX form)."""
    return path.resolve().relative_to(root.resolve()).as_posix()


def file_out_dir(out_dir: str | os.PathLike[str], key: str) -> Path:
    """Search output directory of the file with ledger key ``key``."""
    return Path(out_dir) / FILES_DIR / key.replace("/", "__")


def validate_observation(path: str | os.PathLike[str]) -> Header:
    """Open ``path`` and read both ends of it; raise :class:`ObservationError` if unusable.

    Checks what a reader can check (header, size, truncation) and that the first and last
    samples decode to finite values.
    """
    with open_observation(path) as reader:
        header = reader.header
        if header.nsamples < 2:
            raise ObservationError(path, f"only {header.nsamples} sample(s): nothing to search")
        ends = (0, max(header.nsamples - _PROBE_SAMPLES, 0))
        for start in ends:
            block = reader.read_block(start, _PROBE_SAMPLES)
            if not np.all(np.isfinite(block)):
                raise ObservationError(path, f"non-finite samples near sample {start}")
    return header


def beam_neighbours(paths: Iterable[Path]) -> dict[Path, tuple[Path | None, Path | None]]:
    """For each file, the files of its beam just before and after it: ``{path: (previous,
    next)}``, each ``None`` where no file continues it without a gap
    (:func:`~drafts_ops.io.sequence.contiguity`: same channels, sampling, beam and source,
    starting where the other ends). Unreadable files have no neighbours."""

    headers: dict[Path, Header] = {}
    for path in paths:
        try:
            with open_observation(path) as reader:
                headers[path] = reader.header
        except (DraftsError, OSError):
            continue
    by_beam: dict[tuple, list[Path]] = {}
    for path, h in headers.items():
        by_beam.setdefault((h.ibeam, h.source_name, h.nchans, h.tsamp), []).append(path)
    links: dict[Path, list[Path | None]] = {p: [None, None] for p in headers}
    for group in by_beam.values():
        group.sort(key=lambda p: headers[p].tstart)
        for before, after in itertools.pairwise(group):
            if contiguity(headers[before], headers[after]) is None:
                links[before][1], links[after][0] = after, before
    return {p: (prev, nxt) for p, (prev, nxt) in links.items()}


def quarantine(path: str | os.PathLike[str], out_dir: str | os.PathLike[str], reason: str) -> Path:
    """Move ``path`` to ``OUT/quarantine/`` and write ``<name>.reason.txt`` beside it.

    The reason is written first (atomically), so a crash in between leaves the reason and
    the file still in place, and the next run quarantines it again. A file that cannot be
    moved (read-only input) stays where it is; the reason file says so. Returns the
    reason file's path.
    """
    src = Path(path)
    qdir = Path(out_dir) / QUARANTINE_DIR
    reason_file = qdir / f"{src.name}.reason.txt"
    write_text_atomic(reason_file, f"{src}\n{reason}\n")
    try:
        qdir.mkdir(parents=True, exist_ok=True)
        shutil.move(str(src), qdir / src.name)
    except OSError as err:
        write_text_atomic(reason_file, f"{src}\n{reason}\n(not moved: {err})\n")
    return reason_file


def count_bursts(path: str | os.PathLike[str]) -> int:
    """Rows of a candidates CSV whose ``is_burst`` column says True (the classifier's call)."""
    with Path(path).open(newline="", encoding="utf-8") as fh:
        return sum(row.get("is_burst") == "True" for row in csv.DictReader(fh))


def merge_candidate_files(
    files: Iterable[tuple[str, Path]], out_dir: str | os.PathLike[str]
) -> tuple[Path, int]:
    """Concatenate per-file candidate CSVs into ``OUT/survey_candidates.csv``.

    ``files`` gives ``(key, csv_path)`` pairs; the output has a leading ``key`` column and
    the union of the inputs' columns (``key`` is the ledger key; the candidates' own
    ``file`` column, when present, keeps the path searched). Returns the path and the
    number of candidates.
    """
    rows: list[dict[str, str]] = []
    columns: dict[str, None] = {"key": None}
    for key, csv_path in sorted(files):
        try:
            with Path(csv_path).open(newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                columns.update(dict.fromkeys(reader.fieldnames or ()))
                rows.extend({**row, "key": key} for row in reader)
        except OSError as err:
            raise DraftsError(f"{csv_path}: cannot read candidates of {key}: {err}") from None
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path = write_text_atomic(Path(out_dir) / SURVEY_CANDIDATES, buffer.getvalue())
    return path, len(rows)


GROUPS_DIR = "groups"
BEAM_CANDIDATES = "beam_candidates.csv"


def coincide_groups(
    ledger, root: Path, out_dir: str | os.PathLike[str], layout_name: str, pattern: str
) -> list[dict[str, object]]:
    """Coincidence of every beam group whose files are done (or partly done).

    Groups files by beam (:func:`drafts_ops.survey.beams.beam_groups`) from the ledger's keys;
    for each group, reads the finished beams' candidates, runs
    :func:`~drafts_ops.survey.beams.coincidence`, writes ``OUT/groups/<group>.csv`` and records
    the group in the ledger. Beams not (yet) searched or broken are listed as missing; the
    group is processed with the beams that exist. Rebuilds ``OUT/beam_candidates.csv``
    (every group's candidates with the coincidence columns and a ``group`` column).
    Returns one summary per group.
    """

    layout = load_layout(layout_name)
    out = Path(out_dir)

    def header(key: str):
        try:
            with open_observation(Path(root) / key) as reader:
                return reader.header
        except (OSError, DraftsError):
            return None

    groups = beam_groups(sorted(ledger.entries), pattern, header)
    summaries = []
    merged: list[tuple[str, Path]] = []
    for group, beams in sorted(groups.items()):
        done = {b: k for b, k in ((b, Path(p).as_posix()) for b, p in beams.items())
                if ledger.entries[k].status == "done"}  # fmt: skip
        if not done:
            continue
        per_beam = {b: read_csv(out / ledger.entries[k].candidates_file) for b, k in done.items()}
        with open_observation(root / next(iter(done.values()))) as reader:
            freqs = reader.header.chan_freqs
        result = coincidence(per_beam, layout, freqs, group=group)
        safe = group.replace("*", "X").replace("/", "__")
        path = write_group(result, out / GROUPS_DIR / f"{safe}.csv")
        summary = {**result.summary(), "file": path.relative_to(out).as_posix(),
                   "beams_not_done": sorted(set(beams) - set(done))}  # fmt: skip
        ledger.record_group(group, summary)
        summaries.append(summary)
        merged.append((group, path))
    _concatenate(merged, out / BEAM_CANDIDATES, "group")
    return summaries


def _concatenate(files: list[tuple[str, Path]], target: Path, key: str) -> Path:
    rows: list[dict[str, str]] = []
    columns: dict[str, None] = {key: None}
    for name, path in files:
        with Path(path).open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            columns.update(dict.fromkeys(reader.fieldnames or ()))
            rows.extend({**row, key: name} for row in reader)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return write_text_atomic(target, buffer.getvalue())
