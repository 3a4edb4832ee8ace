"""The search flow: one observation, its stages as Prefect tasks.

The stage sequence lives in :func:`drafts_ops.search.run_search`; this module only says
how a stage runs under Prefect (:class:`PrefectStages`): each stage is a task of the same
name, segments of blocks are submitted with at most ``options.max_workers`` unfinished at
once on the flow's task runner (a thread pool, or a Dask cluster: :mod:`flows.runners`).
Tasks pass file paths and a small picklable plan, never data arrays. The perf log
(``OUT/perf.json``) is published as a table artifact and summarised in one log line.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import get_run_context

from drafts_ops import search
from drafts_ops.core.perf import PerfReport
from drafts_ops.search.config import SearchOptions
from drafts_ops.search.plan import SearchPlan
from flows.deploy import check_run_paths
from flows.runners import default_task_runner, runner_name, submit_bounded


def retry_on_io_error(task: Any, task_run: Any, state: Any) -> bool:
    """Retry a task only when it failed with a transient ``OSError`` (storage hiccups, NFS):
    not a full disk, a missing file or a permission problem, which retrying cannot mend."""
    import errno

    try:
        state.result()
    except OSError as err:
        return err.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM,
                                 errno.ENOENT, errno.EROFS)  # fmt: skip
    except Exception:  # a bad file or parameter does not get better by retrying
        return False
    return False


_IO_RETRIES = {"retries": 2, "retry_delay_seconds": 1, "retry_condition_fn": retry_on_io_error}
#: Stages that read or write files retry on transient I/O errors.
_RETRIED = {"plan", "dedisperse_detect", "merge", "cutouts", "write"}


def _stage_task(name: str, fn: Callable[..., Any]):
    options = _IO_RETRIES if name in _RETRIED else {}
    return task(fn, name=name.replace("_", "-"), cache_policy=NO_CACHE, **options)


class PrefectStages:
    """Runs :func:`drafts_ops.search.run_search`'s stages as Prefect tasks."""

    orchestrator = "prefect"

    def __init__(self, max_workers: int, progress: bool = False) -> None:
        self.max_workers = max_workers
        self.progress = progress
        self.name = runner_name(get_run_context().task_runner)

    def stage(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        if self.progress and name == "cutouts":  # the one long stage after the pass
            with CountProgress(f"{Path(str(args[1])).name}: cutouts", "candidate") as bar:
                return _stage_task(name, fn)(*args, on_candidate=bar.update_to)
        result = _stage_task(name, fn)(*args)
        if name == "plan":
            get_run_logger().info("%s: %s%s", args[0], result.summary_line(),
                                  "".join(f"; {note}" for note in result.notes))  # fmt: skip
        return result

    def search_blocks(
        self, parts: Sequence[tuple[int, ...]], plan: SearchPlan, work_dir: str
    ) -> list[Path]:
        segment = _stage_task("dedisperse_detect", search.search_segment).with_options(
            task_run_name="dedisperse_detect-{block_indices}"
        )
        progress = (
            BlockProgress(Path(plan.path).name, plan.block_shares()) if self.progress else None
        )
        # a thread of this process reports each block; a Dask worker cannot reach the bar
        on_block = progress.block_done if progress and "Dask" not in self.name else None
        results: dict[int, Path] = {}
        submitted = submit_bounded(
            lambda i: segment.submit(parts[i], plan.path, plan, work_dir, on_block=on_block),
            range(len(parts)),
            self.max_workers,
        )
        try:
            for index, future in submitted:
                results[index] = future.result()
                if progress is not None:
                    progress.segment_done(parts[index])
        finally:
            if progress is not None:
                progress.close()
        return [results[i] for i in range(len(parts))]


class CountProgress:
    """A progress bar over a stage's items (``update_to(done, total)``), made at the first
    item; leaves no line behind."""

    def __init__(self, desc: str, unit: str) -> None:
        self.desc, self.unit = desc, unit
        self.bar: Any = None

    def update_to(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=self.desc, unit=self.unit, leave=False)
        self.bar.update(done - self.bar.n)

    def __enter__(self) -> CountProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


class BlockProgress:
    """A progress bar over a search's streaming pass, in per cent of its work: each block
    advances it by its share (:meth:`SearchPlan.block_shares`), so the time left holds
    though a block of the full-resolution DM range costs many of a coarse range's. A
    block is counted once (a retried segment reports its blocks again)."""

    def __init__(self, name: str, shares: Sequence[float]) -> None:
        from tqdm import tqdm

        self.shares = list(shares)
        self.counted: set[int] = set()
        self.done = 0.0  # the counted blocks' shares
        self._lock = threading.Lock()
        self.bar = tqdm(total=100.0, desc=name, unit="%", leave=False,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| "
                                   "[{elapsed}<{remaining}]")  # fmt: skip

    def block_done(self, index: int) -> None:
        """Block ``index`` is searched (called from the thread that searched it)."""
        with self._lock:
            if index not in self.counted:
                self.counted.add(index)
                self.done += self.shares[index]
                self.bar.update(min(100.0, 100.0 * self.done) - self.bar.n)  # not past 100

    def segment_done(self, indices: Sequence[int]) -> None:
        """A segment's blocks are all searched (those not yet reported count now)."""
        for index in indices:
            self.block_done(int(index))

    def close(self) -> None:
        self.bar.close()


def artifact_key(prefix: str, path: str | Path, *parts: str) -> str:
    """A valid artifact key (lowercase letters, digits, dashes) naming a file."""
    raw = "-".join([prefix, Path(path).stem, *parts]).lower()
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", raw)).strip("-")


def publish_perf(report: PerfReport, key: str) -> None:
    """Publish the perf log as a table artifact and one log line."""
    create_table_artifact(table=report.table_rows(), key=key, description=report.summary_line())
    get_run_logger().info(report.summary_line())


def search_segments(options: SearchOptions) -> int:
    """Streaming passes a search is split into: one on this machine (the kernels use every
    core already), ``max_workers`` on a Dask cluster (one pass per worker)."""
    runner = get_run_context().task_runner
    return options.max_workers if "Dask" in type(runner).__name__ else 1


@flow(name="drafts-search", task_runner=default_task_runner(), validate_parameters=True)
def search_flow(
    path: str | list[str],
    out_dir: str,
    options: SearchOptions = SearchOptions(),  # noqa: B008 (frozen, safe as a default)
    progress: bool = False,
) -> dict[str, Any]:
    """Search one observation ``path`` into ``out_dir``: one file, or the consecutive files
    of one observation (a list), searched as one stream.

    Returns a small summary: candidate count, output paths, the perf.json path, wall time
    and real-time factor.
    """
    check_run_paths(path=path, out_dir=out_dir)
    config = options.config()
    name = path if isinstance(path, str) else path[0]  # names the artifacts
    result = search.run_search(
        path,
        out_dir,
        config,
        runner=PrefectStages(options.max_workers, progress),
        segments=search_segments(options),
        trace_memory=options.trace_memory,
        keep_intermediates=options.keep_intermediates,
    )
    publish_perf(result.perf, artifact_key("perf", name, config.dedisp_mode))
    from prefect.artifacts import create_markdown_artifact

    from drafts_ops.search.report import markdown_summary

    create_markdown_artifact(markdown=markdown_summary(result.candidates, name),
                             key=artifact_key("search", name),
                             description=f"drafts-ops search of {name}")  # fmt: skip
    return result.to_dict()
