"""The search flow: one observation, stage by stage, blocks searched concurrently.

Tasks are thin wrappers over the pipeline's stage functions (``drafts_ops``); they pass
file paths and a small picklable plan, never data arrays. Blocks are submitted with at most
``options.max_workers`` unfinished at once, on the flow's task runner (a thread pool, or a
Dask cluster: :mod:`flows.runners`). Every stage is timed into ``OUT/perf.json``
(:mod:`drafts_ops.perf`), published as a table artifact and summarised in one log line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import get_run_context

from drafts_ops.perf import PerfRecorder, PerfReport
from drafts_ops.searchrun import (
    BLOCKS_DIR,
    SearchRun,
    observation_size,
    pipeline,
    run_info,
    stage_extent,
)
from flows.options import SearchOptions
from flows.runners import default_task_runner, runner_name, submit_bounded


def retry_on_io_error(task: Any, task_run: Any, state: Any) -> bool:
    """Retry a task only when it failed with an ``OSError`` (storage hiccups, NFS)."""
    try:
        state.result()
    except OSError:
        return True
    except Exception:  # a bad file or parameter does not get better by retrying
        return False
    return False


_IO_RETRIES = {"retries": 2, "retry_delay_seconds": 1, "retry_condition_fn": retry_on_io_error}


@task(name="plan", cache_policy=NO_CACHE, **_IO_RETRIES)
def plan_task(path: str, config: Any) -> Any:
    """Read the header, choose DM trials and blocks."""
    plan = pipeline.plan_search(path, config)
    get_run_logger().info("%s: %d DM trials, %d blocks", path, len(plan.dms), len(plan.blocks))
    return plan


@task(
    name="dedisperse-detect",
    task_run_name="block-{block_index}",
    cache_policy=NO_CACHE,
    **_IO_RETRIES,
)
def block_task(path: str, plan: Any, block_index: int, work_dir: str) -> Path:
    """Dedisperse and search one block; returns the path of its result file."""
    return pipeline.process_block(path, plan, block_index, work_dir)


@task(name="merge", cache_policy=NO_CACHE, **_IO_RETRIES)
def merge_task(block_files: list[Path], plan: Any) -> list[Any]:
    """Cluster the blocks' detections into candidates (across block boundaries)."""
    candidates = pipeline.merge_block_results(block_files, plan)
    get_run_logger().info(
        "%d candidates after merging %d blocks", len(candidates), len(block_files)
    )
    return candidates


@task(name="classify", cache_policy=NO_CACHE)
def classify_task(candidates: list[Any], path: str, plan: Any) -> list[Any]:
    """Score candidates with the configured detector/classifier."""
    return pipeline.classify_candidates(candidates, path, plan)


@task(name="write", cache_policy=NO_CACHE, **_IO_RETRIES)
def write_task(candidates: list[Any], path: str, plan: Any, out_dir: str) -> dict[str, Path]:
    """Write candidate files and plots atomically; returns their paths by kind."""
    outputs = pipeline.write_outputs(candidates, path, plan, out_dir)
    get_run_logger().info("wrote %s", ", ".join(f"{k}={v}" for k, v in outputs.items()))
    return outputs


def artifact_key(prefix: str, path: str | Path, *parts: str) -> str:
    """A valid artifact key (lowercase letters, digits, dashes) naming a file."""
    raw = "-".join([prefix, Path(path).stem, *parts]).lower()
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", raw)).strip("-")


def publish_perf(report: PerfReport, key: str) -> None:
    """Publish the perf log as a table artifact and one log line."""
    create_table_artifact(table=report.table_rows(), key=key, description=report.summary_line())
    get_run_logger().info(report.summary_line())


def _run_blocks(path: str, plan: Any, work_dir: Path, limit: int, progress: bool) -> list[Path]:
    indices = range(len(plan.blocks))
    submitted = submit_bounded(
        lambda i: block_task.submit(path, plan, i, str(work_dir)), indices, limit
    )
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(indices), desc=Path(path).name, unit="block", leave=False)
    results: dict[int, Path] = {}
    for index, future in submitted:
        results[index] = future.result()
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    return [results[i] for i in indices]


@flow(name="drafts-search", task_runner=default_task_runner(), validate_parameters=True)
def search_flow(
    path: str,
    out_dir: str,
    options: SearchOptions = SearchOptions(),  # noqa: B008 (frozen, safe as a default)
    progress: bool = False,
) -> dict[str, Any]:
    """Search one observation ``path`` into ``out_dir``.

    Returns a small summary: candidate count, output paths, the perf.json path, wall time
    and real-time factor.
    """
    out = Path(out_dir)
    config = options.config()
    perf = PerfRecorder(trace_memory=options.trace_memory)
    with perf.stage("plan"):
        plan = plan_task(path, config)
    size = observation_size(plan)
    extent = stage_extent("dedisperse_detect", size)
    with perf.stage("dedisperse_detect", calls=len(plan.blocks), **extent):
        block_files = _run_blocks(path, plan, out / BLOCKS_DIR, options.max_workers, progress)
    with perf.stage("merge", **extent):
        candidates = merge_task(block_files, plan)
    with perf.stage("classify", **extent):
        candidates = classify_task(candidates, path, plan)
    with perf.stage("write", **extent):
        outputs = write_task(candidates, path, plan, str(out))
    runner = runner_name(get_run_context().task_runner)
    report = perf.report(
        run=run_info(path, config, "prefect", runner), observation=size, candidates=len(candidates)
    )
    report.write(out)
    publish_perf(report, artifact_key("perf", path, config.dedisp_mode))
    return SearchRun(Path(path), out, len(candidates), outputs, report).to_dict()
