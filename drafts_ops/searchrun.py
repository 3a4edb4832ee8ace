"""A search of one observation with its performance log, without an orchestrator.

:func:`search_file` runs the pipeline's stages one after another in this process and
writes ``OUT/perf.json`` (:mod:`drafts_ops.perf`); the Prefect search flow runs the same
stages as tasks and writes the same log. The survey uses :func:`search_file` for each file,
so a file's search can run on any worker (a thread, a Dask worker) without Prefect there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drafts_ops import pipeline
from drafts_ops.perf import ObservationSize, PerfRecorder, PerfReport

PathLike = str | os.PathLike[str]
#: Stage names, in order, as they appear in ``perf.json``.
STAGES = ("plan", "dedisperse_detect", "merge", "classify", "write")
#: Per-block intermediate results live here under the output directory.
BLOCKS_DIR = "blocks"


def observation_size(plan: pipeline.SearchPlan) -> ObservationSize:
    """Channels, searched samples, sampling time and DM trials of a search plan."""
    header = plan.header  # the searched data (after any decimation)
    nsamples = sum(block.stop - block.start for block in plan.blocks)
    return ObservationSize(header.nchans, nsamples, header.tsamp, len(plan.dms))


def run_info(
    path: PathLike, config: pipeline.SearchConfig, orchestrator: str, task_runner: str
) -> dict[str, Any]:
    """The ``run`` section of ``perf.json``."""
    return {
        "file": str(path),
        "dedisp_mode": config.dedisp_mode,
        "algorithm": config.algorithm,
        "detector": config.detector,
        "orchestrator": orchestrator,
        "task_runner": task_runner,
    }


def stage_extent(name: str, size: ObservationSize) -> dict[str, int]:
    """``samples`` and ``cells`` a stage covers (0 for the plan: it reads no data)."""
    if name == "plan":
        return {"samples": 0, "cells": 0}
    return {"samples": size.nsamples, "cells": size.cells}


@dataclass(frozen=True)
class SearchRun:
    """Outcome of a search: candidate count, output files (by kind) and the perf log."""

    path: Path
    out_dir: Path
    candidates: int
    outputs: dict[str, Path]
    perf: PerfReport

    def to_dict(self) -> dict[str, Any]:
        """Small JSON-friendly summary (what flows pass around)."""
        return {
            "path": str(self.path),
            "out_dir": str(self.out_dir),
            "candidates": self.candidates,
            "outputs": {k: str(v) for k, v in self.outputs.items()},
            "perf": str(self.out_dir / "perf.json"),
            "wall_s": self.perf.wall_s,
            "realtime_factor": self.perf.realtime_factor,
        }


def search_file(
    path: PathLike,
    out_dir: PathLike,
    config: pipeline.SearchConfig,
    *,
    trace_memory: bool = False,
    on_block: Callable[[int], None] | None = None,
) -> SearchRun:
    """Search ``path`` into ``out_dir`` stage by stage; write ``perf.json`` there.

    ``on_block(i)`` is called after each block (progress bars).
    """
    out = Path(out_dir)
    perf = PerfRecorder(trace_memory=trace_memory)
    with perf.stage("plan"):
        plan = pipeline.plan_search(path, config)
    size = observation_size(plan)
    extent = stage_extent("dedisperse_detect", size)
    with perf.stage("dedisperse_detect", calls=len(plan.blocks), **extent):
        block_files = []
        for i in range(len(plan.blocks)):
            block_files.append(pipeline.process_block(path, plan, i, out / BLOCKS_DIR))
            if on_block is not None:
                on_block(i)
    with perf.stage("merge", **extent):
        candidates = pipeline.merge_block_results(block_files, plan)
    with perf.stage("classify", **extent):
        candidates = pipeline.classify_candidates(candidates, path, plan)
    with perf.stage("write", **extent):
        outputs = pipeline.write_outputs(candidates, path, plan, out)
    report = perf.report(
        run=run_info(path, config, "direct", "serial"), observation=size, candidates=len(candidates)
    )
    report.write(out)
    return SearchRun(Path(path), out, len(candidates), outputs, report)
