"""The validation flow: prototype against every production algorithm, stage by stage.

Thin tasks over :mod:`drafts_ops.validation.stages`; they pass file paths and small records
(the DM–time arrays go to ``OUT/work`` while it runs, removed once the report is written).
Paths run one after another so that their timings do not disturb each other. The report
is written to ``OUT/validation.{html,md,json}`` and ``validation.md`` is published as a
Prefect markdown artifact.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed

from drafts_ops.validation import stages
from drafts_ops.validation.config import DelayFault, ValidationConfig
from drafts_ops.validation.report import to_markdown, write_report
from flows.deploy import check_run_paths


@task(name="validation-plan", cache_policy=NO_CACHE)
def plan_task(file: str, config: ValidationConfig, work_dir: str) -> list[stages.FilePlan]:
    """DM plan of each DM range, overlap and the paths to run for one file."""
    fplans = stages.plan_file(file, config, work_dir)
    for fplan in fplans:
        get_run_logger().info("%s: %d DM trials, overlap %d samples, paths %s", fplan.label,
                              len(fplan.dms), fplan.overlap, ", ".join(fplan.paths))  # fmt: skip
    return fplans


@task(name="validation-dedisperse", task_run_name="dedisperse-{name}", cache_policy=NO_CACHE)
def run_path_task(fplan: stages.FilePlan, name: str) -> Any:
    """Stream the file through one path; returns the run record (output in the work dir)."""
    run = stages.run_path(fplan, name)
    get_run_logger().info("%s: %d blocks, dedisperse %.3f s", name, run.nblocks,
                          run.dedisperse_s)  # fmt: skip
    return run


@task(name="validation-detect", task_run_name="detect-{run.name}", cache_policy=NO_CACHE)
def detect_task(fplan: stages.FilePlan, run: Any) -> Any:
    """Boxcar search of one path's output."""
    return stages.detect(fplan, run)


@task(name="validation-evaluate", cache_policy=NO_CACHE)
def evaluate_task(fplan: stages.FilePlan, runs: dict, detections: dict) -> stages.FileResult:
    """Parity, localisation, S/N at bursts, candidate agreement, performance, verdict."""
    from drafts_ops.validation.plots import file_plots

    result = stages.evaluate(fplan, runs, detections)
    result.plots = file_plots(runs, result)
    for line in result.verdict:
        get_run_logger().info("%s", line)
    return result


@task(name="validation-report", cache_policy=NO_CACHE)
def report_task(results: list, config: ValidationConfig, out_dir: str) -> dict[str, str]:
    """Write the three report files and publish the Markdown as an artifact."""
    report = stages.build_report(results, config)
    paths = write_report(report, out_dir)
    create_markdown_artifact(
        markdown=to_markdown(report),
        key=artifact_key(out_dir),
        description=f"drafts-ops validation: {'PASS' if report.passed else 'FAIL'}",
    )
    return {k: str(v) for k, v in paths.items()}


def verdict_text(result: stages.FileResult) -> list[str]:
    """A result's verdict lines, after its DM range where the file has several."""
    lines = [str(line) for line in result.verdict]
    return [f"{result.label}:", *lines] if result.label != result.file else lines


def artifact_key(out_dir: str | Path) -> str:
    """Artifact key (lowercase letters, digits, dashes) for a report directory."""
    raw = f"validation-{Path(out_dir).resolve().name}".lower()
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", raw)).strip("-")


def make_config(**options: Any) -> ValidationConfig:
    """:class:`ValidationConfig` from flat flow parameters (``delay_fault`` as a string)."""
    fault = options.pop("delay_fault", None)
    algorithms = options.pop("algorithms", None)
    return ValidationConfig(
        **{k: v for k, v in options.items() if v is not None},
        algorithms=tuple(algorithms) if algorithms else None,
        delay_fault=DelayFault.parse(fault) if fault else None,
    )


@flow(name="drafts-validate", validate_parameters=True)
def validate_flow(  # noqa: PLR0917 (flow parameters, also passed by keyword)
    files: list[str],
    out_dir: str,
    dm_min: float = 0.0,
    dm_max: float = 1000.0,
    dm_step: float | None = None,
    dm_ranges: bool = True,
    algorithms: list[str] | None = None,
    backend: str = "cpu",
    block_size: int = 8192,
    max_samples: int | None = None,
    repeats: int = 1,
    delay_fault: str | None = None,
) -> dict[str, Any]:
    """Validate the production dedispersion against the prototype on ``files``, each of
    the search's DM ranges at its own time resolution (``dm_ranges``).

    ``delay_fault="DM_INDEX,CHANNEL[,SHIFT[,ALGORITHM]]"`` breaks one production delay on
    purpose (self-test: the report must fail and locate it). Returns ``passed``, the
    report paths and the verdict lines.
    """
    check_run_paths(files=files, out_dir=out_dir)
    config = make_config(dm_min=dm_min, dm_max=dm_max, dm_step=dm_step, dm_ranges=dm_ranges,
                         algorithms=algorithms,
                         backend=backend, block_size=block_size, max_samples=max_samples,
                         repeats=repeats, delay_fault=delay_fault)  # fmt: skip
    work = str(Path(out_dir) / "work")
    results = []
    for file in files:
        for fplan in plan_task(file, config, work):  # each DM range in turn
            runs = {name: run_path_task(fplan, name) for name in fplan.paths}
            detections = {name: detect_task(fplan, run) for name, run in runs.items()}
            results.append(evaluate_task(fplan, runs, detections))
    paths = report_task(results, config, out_dir)
    shutil.rmtree(work, ignore_errors=True)  # the paths' DM-time arrays: the report has them
    passed = all(r.passed for r in results)
    get_run_logger().info("validation %s: %s", "PASS" if passed else "FAIL", paths["html"])
    summary = {
        "passed": passed,
        "reports": paths,
        "verdict": [text for r in results for text in verdict_text(r)],
    }
    if not passed:  # the run ends Failed (alerts on run state fire); the report is written
        return Failed(message=f"validation FAIL: {paths['html']}", data=summary)
    return summary
