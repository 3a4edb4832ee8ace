"""Performance log of a search: per-stage timings, throughput, memory, real-time factor.

Science side (no Prefect): the search flow, the survey and the one-shot search all record
their stages with one :class:`PerfRecorder` and write one :class:`PerfReport` as
``OUT/perf.json`` (atomically), so both dedispersion modes and both orchestrations share
one schema.

Schema of ``perf.json`` (``schema = "drafts-ops/perf"``, ``schema_version = 1``)::

    {
      "schema": "drafts-ops/perf", "schema_version": 1,
      "run": {                      # what was run, free-form strings and numbers
        "file": str, "dedisp_mode": "prototype"|"production", "algorithm": str,
        "detector": str, "orchestrator": "prefect"|"direct", "task_runner": str,
        "started_utc": ISO-8601 str, "host": {"node": str, "cpus": int, "python": str, ...}
      },
      "observation": {
        "nchans": int, "nsamples": int, "tsamp_s": float, "duration_s": float, "ndm": int
      },
      "stages": [                   # in execution order
        {
          "name": str,              # plan | dedisperse_detect | merge | classify | write | ...
          "calls": int,             # task calls aggregated (blocks for dedisperse_detect)
          "wall_s": float,          # wall-clock time of the stage, s
          "cpu_s": float,           # process CPU time during the stage (all threads), s
          "samples": int,           # time samples the stage covered (0: not data-bound)
          "cells": int,             # channel x sample x DM-trial cells the stage covered
          "samples_per_s": float|null,   # samples / wall_s
          "cells_per_s": float|null,     # cells / wall_s  (channel.sample.DM per second)
          "peak_rss_mib": float,    # process resident-set high-water mark after the stage
          "peak_traced_mib": float|null  # tracemalloc peak inside the stage (if traced)
        }, ...
      ],
      "total": {
        "wall_s": float, "cpu_s": float, "samples_per_s": float|null,
        "cells_per_s": float|null, "realtime_factor": float|null,
        "peak_rss_mib": float, "candidates": int
      }
    }

Definitions:

* ``wall_s`` uses :func:`time.perf_counter`; ``cpu_s`` uses :func:`time.process_time`, the
  CPU time of the whole process (every thread, so Numba's parallel threads and concurrent
  batch tasks count). With a distributed task runner the work runs in other processes and
  is not in ``cpu_s``.
* ``peak_rss_mib`` is the process's peak resident memory since it started (Linux:
  ``VmHWM`` of ``/proc/self/status``; elsewhere ``getrusage(RUSAGE_SELF).ru_maxrss``):
  monotonic over stages, it
  bounds the memory the run needed. ``peak_traced_mib`` is the peak of Python and numpy
  allocations inside the stage from :mod:`tracemalloc`, only when tracing is asked for
  (it slows allocation-heavy code), else ``null``.
* ``realtime_factor`` = observation duration (s) / total wall time (s): above 1 the
  search keeps up with the telescope.
* Total ``wall_s`` is the sum of the stages' wall times (stages run one after another).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import resource
import sys
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from drafts_ops.core.atomic import write_json_atomic
from drafts_ops.core.errors import DraftsError

SCHEMA = "drafts-ops/perf"
SCHEMA_VERSION = 1
PERF_FILENAME = "perf.json"
_MIB = 1024.0 * 1024.0


def peak_rss_mib() -> float:
    """Peak resident memory of this process since it started, MiB.

    On Linux the high-water mark of this process's own memory (``VmHWM`` of
    ``/proc/self/status``): ``ru_maxrss`` there keeps the peak of the process it was
    forked from across ``exec`` (a search started by a 1.3 GB benchmark process reported
    1.3 GB whatever it used). Elsewhere ``getrusage``'s ``ru_maxrss``.
    """
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / _MIB if sys.platform == "darwin" else peak / 1024.0


def host_info() -> dict[str, Any]:
    """Small description of the machine for the log (node, CPUs, Python, platform)."""
    return {
        "node": platform.node(),
        "cpus": os.cpu_count() or 1,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def _rate(amount: int, seconds: float) -> float | None:
    return amount / seconds if amount > 0 and seconds > 0 else None


@dataclass(frozen=True)
class StageRecord:
    """Measurements of one stage (see the module docstring for the meaning of each field)."""

    name: str
    wall_s: float
    cpu_s: float
    samples: int = 0
    cells: int = 0
    calls: int = 1
    peak_rss_mib: float = 0.0
    peak_traced_mib: float | None = None

    @property
    def samples_per_s(self) -> float | None:
        """Time samples per wall-clock second."""
        return _rate(self.samples, self.wall_s)

    @property
    def cells_per_s(self) -> float | None:
        """Channel x sample x DM cells per wall-clock second."""
        return _rate(self.cells, self.wall_s)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["samples_per_s"] = self.samples_per_s
        out["cells_per_s"] = self.cells_per_s
        return {k: out[k] for k in _STAGE_KEYS}


_STAGE_KEYS = (
    "name",
    "calls",
    "wall_s",
    "cpu_s",
    "samples",
    "cells",
    "samples_per_s",
    "cells_per_s",
    "peak_rss_mib",
    "peak_traced_mib",
)


@dataclass(frozen=True)
class ObservationSize:
    """The size of what was searched: channels, samples (sampling interval s), DM trials."""

    nchans: int
    nsamples: int
    tsamp_s: float
    ndm: int

    @property
    def duration_s(self) -> float:
        return self.nsamples * self.tsamp_s

    @property
    def cells(self) -> int:
        """Channel x sample x DM cells of a full search."""
        return self.nchans * self.nsamples * self.ndm

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "duration_s": self.duration_s}


@dataclass
class PerfRecorder:
    """Collects :class:`StageRecord` s, one per stage, in order.

    Use :meth:`stage` as a context manager around each stage. ``trace_memory=True`` turns
    :mod:`tracemalloc` on for the recorder's lifetime (until :meth:`report`).
    """

    trace_memory: bool = False
    stages: list[StageRecord] = field(default_factory=list)
    started_utc: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    )
    _started_tracing: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.trace_memory and not tracemalloc.is_tracing():
            tracemalloc.start()
            self._started_tracing = True

    @contextlib.contextmanager
    def stage(
        self, name: str, *, samples: int = 0, cells: int = 0, calls: int = 1
    ) -> Iterator[None]:
        """Measure the enclosed code as stage ``name`` covering ``samples`` and ``cells``."""
        tracing = self.trace_memory and tracemalloc.is_tracing()
        if tracing:
            tracemalloc.reset_peak()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        yield
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        traced = tracemalloc.get_traced_memory()[1] / _MIB if tracing else None
        self.add(StageRecord(name, wall, cpu, samples, cells, calls, peak_rss_mib(), traced))

    def add(self, record: StageRecord) -> None:
        """Append a stage measured elsewhere (e.g. in a task on another worker)."""
        self.stages.append(record)

    def report(
        self, *, run: dict[str, Any], observation: ObservationSize, candidates: int
    ) -> PerfReport:
        """The finished log; stops tracing if this recorder started it."""
        if self._started_tracing:
            tracemalloc.stop()
            self._started_tracing = False
        run = {"started_utc": self.started_utc, "host": host_info(), **run}
        return PerfReport(run, observation, tuple(self.stages), candidates)


@dataclass(frozen=True)
class PerfReport:
    """A run's performance log: what ran, how big it was, each stage, totals."""

    run: dict[str, Any]
    observation: ObservationSize
    stages: tuple[StageRecord, ...]
    candidates: int

    @property
    def wall_s(self) -> float:
        return sum(s.wall_s for s in self.stages)

    @property
    def cpu_s(self) -> float:
        return sum(s.cpu_s for s in self.stages)

    @property
    def realtime_factor(self) -> float | None:
        """Observation seconds per wall-clock second of the whole run."""
        duration = self.observation.duration_s
        return duration / self.wall_s if self.wall_s > 0 and duration > 0 else None

    @property
    def peak_rss_mib(self) -> float:
        return max((s.peak_rss_mib for s in self.stages), default=peak_rss_mib())

    def stage(self, name: str) -> StageRecord:
        """The record of stage ``name``."""
        for record in self.stages:
            if record.name == name:
                return record
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The ``perf.json`` document (see the module docstring)."""
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "run": self.run,
            "observation": self.observation.to_dict(),
            "stages": [s.to_dict() for s in self.stages],
            "total": {
                "wall_s": self.wall_s,
                "cpu_s": self.cpu_s,
                "samples_per_s": _rate(self.observation.nsamples, self.wall_s),
                "cells_per_s": _rate(self.observation.cells, self.wall_s),
                "realtime_factor": self.realtime_factor,
                "peak_rss_mib": self.peak_rss_mib,
                "candidates": self.candidates,
            },
        }

    def write(self, out_dir: str | os.PathLike[str]) -> Path:
        """Write ``out_dir/perf.json`` atomically; returns its path."""
        return write_json_atomic(Path(out_dir) / PERF_FILENAME, self.to_dict())

    def table_rows(self) -> list[dict[str, Any]]:
        """One row per stage plus a ``total`` row, rounded for display (artifact tables)."""
        rows = [_display_row(s.to_dict()) for s in self.stages]
        total = self.to_dict()["total"]
        rows.append(
            _display_row(
                {
                    "name": "total",
                    "calls": sum(s.calls for s in self.stages),
                    "wall_s": total["wall_s"],
                    "cpu_s": total["cpu_s"],
                    "samples": self.observation.nsamples,
                    "cells": self.observation.cells,
                    "samples_per_s": total["samples_per_s"],
                    "cells_per_s": total["cells_per_s"],
                    "peak_rss_mib": total["peak_rss_mib"],
                    "peak_traced_mib": None,
                }
            )
        )
        return rows

    def summary_line(self) -> str:
        """One log line: total time, real-time factor, slowest stage, memory."""
        slowest = max(self.stages, key=lambda s: s.wall_s, default=None)
        rtf = self.realtime_factor
        parts = [
            f"perf {self.run.get('dedisp_mode', '?')}/{self.run.get('algorithm', '?')}:",
            f"{self.observation.duration_s:.2f} s of data in {self.wall_s:.2f} s wall",
            f"(real-time x{rtf:.2f})" if rtf is not None else "(real-time n/a)",
            f"cpu {self.cpu_s:.2f} s",
        ]
        if slowest is not None:
            parts.append(f"slowest {slowest.name} {slowest.wall_s:.2f} s")
        parts.append(f"peak RSS {self.peak_rss_mib:.0f} MiB, {self.candidates} candidates")
        return " ".join(parts)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> PerfReport:
        """Rebuild a report from a ``perf.json`` document (checks schema and version)."""
        if doc.get("schema") != SCHEMA or doc.get("schema_version") != SCHEMA_VERSION:
            raise DraftsError(
                f"not a {SCHEMA} v{SCHEMA_VERSION} document: "
                f"{doc.get('schema')!r} v{doc.get('schema_version')!r}"
            )
        obs = {k: v for k, v in doc["observation"].items() if k != "duration_s"}
        stages = tuple(
            StageRecord(**{k: v for k, v in s.items() if not k.endswith("_per_s")})
            for s in doc["stages"]
        )
        return cls(doc["run"], ObservationSize(**obs), stages, int(doc["total"]["candidates"]))


def read_perf(path: str | os.PathLike[str]) -> PerfReport:
    """Read a ``perf.json`` file (or the one in a directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / PERF_FILENAME
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DraftsError(f"{path}: cannot read performance log: {err}") from None
    return PerfReport.from_dict(doc)


def _display_row(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, float):
            out[key] = float(f"{value:.4g}")
        else:
            out[key] = value
    return out
