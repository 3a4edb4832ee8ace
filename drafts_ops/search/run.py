"""The one sequence of a search's stages, :func:`run_search`, and the runner seam.

Stages: plan → dedisperse+detect (a streaming pass over the file, one or more segments of
consecutive blocks) → merge → cutouts → classify → write → report. :func:`run_search` is
the only place that orders them; it runs each stage through a :class:`StageRunner`: the
default runs them here, one after another; the Prefect flow passes a runner that makes
each stage a task (``flows/search.py``). Stages exchange file paths and small picklable
metadata (:class:`~drafts_ops.search.config.SearchConfig`,
:class:`~drafts_ops.search.plan.SearchPlan`), never big arrays.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from drafts_ops.core.hardware import KERNELS_COMPILING, kernels_compiled, mark_kernels_compiled
from drafts_ops.core.perf import PERF_FILENAME, ObservationSize, PerfRecorder, PerfReport
from drafts_ops.detect.candidates import Candidate
from drafts_ops.search.config import PathLike, SearchConfig
from drafts_ops.search.outputs import WORK_DIR, prepare_output_dir, write_manifest
from drafts_ops.search.plan import SearchPlan, plan_search, plan_table
from drafts_ops.search.report import write_search_report
from drafts_ops.search.samples import check_disk_space
from drafts_ops.search.stages import (
    classify_candidates,
    cutout_count,
    make_cutouts,
    merge_block_results,
    write_outputs,
)
from drafts_ops.search.streaming import search_segment

log = logging.getLogger(__name__)

#: Stage names, in order, as they appear in ``perf.json``.
STAGES = ("plan", "dedisperse_detect", "merge", "cutouts", "classify", "write", "report")
#: Intermediate results (per-segment giants, cutouts) live here under the output directory.
# -- the stage sequence ------------------------------------------------------------------


class StageRunner(Protocol):
    """How :func:`run_search` runs its stages (here, or as Prefect tasks)."""

    name: str

    def stage(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` as stage ``name`` and return its result."""

    def search_blocks(
        self, parts: Sequence[tuple[int, ...]], plan: SearchPlan, work_dir: str
    ) -> list[Path]:
        """The streaming pass, stage ``dedisperse_detect``: :func:`search_segment` of each
        run of consecutive blocks (possibly concurrently), their giants' files in order.
        A runner showing progress advances it by each block's share of the work
        (:meth:`SearchPlan.block_shares`)."""


@dataclass
class SerialRunner:
    """Runs every stage in this process, one after another (``on_block`` for progress)."""

    on_block: Callable[[int], None] | None = None
    name: str = "serial"
    orchestrator: str = "direct"

    def stage(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    def search_blocks(
        self, parts: Sequence[tuple[int, ...]], plan: SearchPlan, work_dir: str
    ) -> list[Path]:
        return [search_segment(part, plan.path, plan, work_dir, on_block=self.on_block)
                for part in parts]  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """What a search returns: candidates, files written, the plan and the perf log."""

    path: Path
    out_dir: Path
    candidates: list[Candidate]
    outputs: dict[str, Path]
    plan: SearchPlan
    perf: PerfReport
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Small JSON-friendly summary (what flows pass around)."""
        return {
            "path": str(self.path),
            "out_dir": str(self.out_dir),
            "candidates": len(self.candidates),
            "outputs": {k: str(v) for k, v in self.outputs.items()},
            "perf": str(self.out_dir / "perf.json"),
            "wall_s": self.perf.wall_s,
            "realtime_factor": self.perf.realtime_factor,
            "notes": list(self.perf.run.get("notes", self.plan.notes)),
            "bursts": sum(bool(c.is_burst) for c in self.candidates),
            "plots": sum(k.startswith("png:") for k in self.outputs),
            "report": str(self.outputs.get("report", "")),
            "compiling": KERNELS_COMPILING in self.perf.run.get("notes", ()),
        }


def masked_fraction(work: Path) -> np.ndarray | None:
    """Share of blocks in which each channel was masked, over every streaming pass."""
    counts = [np.load(p) for p in sorted(Path(work).glob("masked_*.npy"))]
    if not counts:
        return None
    total = np.sum(counts, axis=0)
    return total[:-1] / max(int(total[-1]), 1)


def observation_size(plan: SearchPlan) -> ObservationSize:
    """Channels, searched samples, sampling time and DM trials of a search plan."""
    return ObservationSize(plan.header.nchans, plan.searched_samples, plan.header.tsamp,
                           len(plan.dms))  # fmt: skip


def run_search(
    path: PathLike | Sequence[PathLike],
    out_dir: PathLike,
    config: SearchConfig | None = None,
    *,
    runner: StageRunner | None = None,
    segments: int = 1,
    trace_memory: bool = False,
    keep_intermediates: bool = False,
    own: int | None = None,
    lead_in: bool = False,
) -> SearchResult:
    """Search ``path`` into ``out_dir``: the one sequence of the search's stages.

    ``path`` may be consecutive files of one beam; ``own`` and ``lead_in`` report only one
    of them, the others giving context (:func:`plan_search`).

    ``segments`` runs of consecutive blocks are searched as separate streaming passes
    (concurrently where the runner allows: Dask workers). Writes ``perf.json``; the
    intermediates in ``out_dir/work`` are removed after success unless kept.
    """
    config = config or SearchConfig()
    runner = runner or SerialRunner()
    out = Path(out_dir)
    prepare_output_dir(out)
    work = out / WORK_DIR
    perf = PerfRecorder(trace_memory=trace_memory)
    with perf.stage("plan"):
        source = [str(p) for p in path] if isinstance(path, list | tuple) else str(path)
        plan = runner.stage("plan", plan_search, source, config, own, lead_in)
    check_disk_space(plan, work)
    log.info("%s: DM plan\n%s", plan.path, plan_table(plan.range_rows(), plan.header.tsamp))
    notes = list(plan.notes)
    if not kernels_compiled():
        notes.append(KERNELS_COMPILING)
        log.warning("%s: %s", plan.path, KERNELS_COMPILING)
    size = observation_size(plan)
    extent = {"samples": size.nsamples, "cells": size.cells}
    parts = plan.segments(segments)
    with perf.stage("dedisperse_detect", calls=len(plan.blocks), **extent):
        giants = runner.search_blocks(parts, plan, str(work))
    with perf.stage("merge", **extent):
        candidates = runner.stage("merge", merge_block_results, giants, plan, str(work))
    with perf.stage("cutouts", calls=cutout_count(candidates, config), **extent):
        cutouts = runner.stage("cutouts", make_cutouts, candidates, plan.path, plan, str(work))
    with perf.stage("classify", **extent):
        candidates = runner.stage("classify", classify_candidates, candidates, plan, cutouts)
    with perf.stage("write", **extent):
        outputs = runner.stage("write", write_outputs, candidates, plan.path, plan, str(out),
                               cutouts)  # fmt: skip
    run = {
        "file": " ".join(plan.files), "dedisp_mode": config.dedisp_mode,
        "algorithm": config.algorithm,
        "detector": config.detector, "orchestrator": getattr(runner, "orchestrator", "direct"),
        "task_runner": runner.name, "notes": notes, "options": config.to_dict(),
        "plan": {"blocks": len(plan.blocks), "ranges": plan.range_rows()},
    }  # fmt: skip
    with perf.stage("report", **extent):  # the page shows the stages before it
        before = perf.report(run=run, observation=size, candidates=len(candidates))
        outputs["report"] = write_search_report(
            out, plan, candidates=candidates, outputs=outputs, perf=before, cutouts=cutouts,
            masked=masked_fraction(work),
        )  # fmt: skip
    report = perf.report(run=run, observation=size, candidates=len(candidates))
    _finish(out, report, outputs, keep_intermediates=keep_intermediates)
    timings = {s.name: s.wall_s for s in report.stages}
    return SearchResult(path=Path(plan.path), out_dir=out, candidates=candidates, outputs=outputs,
                        plan=plan, perf=report, timings=timings)  # fmt: skip


def _finish(
    out: Path, report: PerfReport, outputs: dict[str, Path], *, keep_intermediates: bool
) -> None:
    """Write ``perf.json``, remove the intermediates (unless kept) and, last,
    ``DONE.json``: from then on the directory holds a finished search."""
    report.write(out)
    if not keep_intermediates:
        shutil.rmtree(out / WORK_DIR, ignore_errors=True)
    write_manifest(out, [*outputs.values(), out / PERF_FILENAME])
    mark_kernels_compiled()
