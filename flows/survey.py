"""The survey flow: search every new observation in a directory, resumably.

A ledger (``OUT/ledger.json``, :mod:`drafts_ops.survey.ledger`) records each file's state, so a
rerun skips finished files, retries failed ones and finishes what a crash interrupted.
Files that fail validation are quarantined (``OUT/quarantine/`` with a reason). Each file
is searched into its own directory (atomic writes); the survey's candidate file is rebuilt
from those after every run, so no candidate is lost or duplicated. Files are searched
concurrently, at most ``options.max_files`` at a time, on the flow's task runner.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed

from drafts_ops.core.atomic import write_json_atomic
from drafts_ops.core.errors import ObservationError, ParameterError
from drafts_ops.search import run_search
from drafts_ops.survey.files import (
    SURVEY_SUMMARY,
    beam_neighbours,
    coincide_groups,
    count_bursts,
    file_key,
    file_out_dir,
    merge_candidate_files,
    quarantine,
    scan,
    settled,
    storage_error,
    survey_lock,
    validate_observation,
)
from drafts_ops.survey.ledger import Ledger
from flows.deploy import check_run_paths
from flows.options import SearchOptions, SurveyOptions
from flows.runners import default_task_runner, submit_bounded
from flows.search import artifact_key, retry_on_io_error

#: The search output that the survey merges (a key of the pipeline's ``write_outputs``).
CANDIDATES_OUTPUT = "csv"


@task(
    name="search-file",
    task_run_name="search-{key}",
    cache_policy=NO_CACHE,
    retries=1,
    retry_delay_seconds=1,
    retry_condition_fn=retry_on_io_error,
)
def search_file_task(  # noqa: PLR0917 (a task's parameters)
    path: str, key: str, out_dir: str, options: SearchOptions,
    previous: str | None = None, following: str | None = None, lead_in: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Validate and search one file; returns its outcome (never raises for a file's own
    problems: each becomes a ledger state, so one file cannot stop the survey).

    ``previous`` / ``following``: the files of its beam just before and after it, read
    as context (:func:`drafts_ops.search.plan_search` ``own``); ``lead_in``: the previous
    file was searched without this one, so its last ``delay(d)`` samples are searched
    here. Where the joined search cannot run (a neighbour is unreadable), the file is
    searched alone.

    Outcomes: ``done``; ``quarantined`` (bad format or header: moved aside); ``unusable``
    (data that cannot be searched, e.g. NaNs); ``vanished`` (deleted meanwhile); ``failed``
    (anything else, e.g. permissions or a full disk: retried by later runs).
    """
    logger = get_run_logger()
    try:
        validate_observation(path)
    except FileNotFoundError:
        return {"status": "vanished", "error": "file disappeared before its search"}
    except ObservationError as err:
        reason_file = quarantine(path, out_dir, err.problem)
        logger.warning("quarantined %s: %s", path, err.problem)
        return {"status": "quarantined", "error": err.problem, "reason_file": str(reason_file)}
    except OSError as err:  # permissions, I/O: may get better, so not quarantined
        return {"status": "failed", "error": f"cannot read {path}: {os.strerror(err.errno or 5)}"}
    out = file_out_dir(out_dir, key)
    run_options = {"trace_memory": options.trace_memory,
                   "keep_intermediates": options.keep_intermediates}  # fmt: skip
    files = [f for f in (previous, path, following) if f]
    try:
        if len(files) > 1:
            try:
                run = run_search(files, out, options.config(), own=files.index(path),
                                 lead_in=lead_in, **run_options)  # fmt: skip
            except (ObservationError, ParameterError) as err:
                logger.warning("%s: searched alone, not with its neighbours: %s", key, err)
                files = [path]
        if len(files) == 1:
            run = run_search(path, out, options.config(), **run_options)
    except (ObservationError, ParameterError) as err:
        logger.warning("%s: cannot be searched: %s", key, err)
        return {"status": "unusable", "error": str(err)}
    except OSError as err:
        problem = storage_error(err)
        if problem is None:
            raise
        logger.error("%s: %s", key, problem)
        return {"status": "failed", "error": problem}
    logger.info("%s: %d candidates; %s", key, len(run.candidates), run.perf.summary_line())
    lookahead = following if following in files else None
    return {"status": "done", "lookahead": lookahead, **run.to_dict()}


def _record(ledger: Ledger, key: str, root: Path, out: Path, future: Any) -> dict[str, Any]:
    """Write one finished file's outcome into the ledger; returns the outcome."""
    try:
        outcome = future.result()
    except Exception as err:  # any failure of one file must not stop the survey
        outcome = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
    status = outcome["status"]
    if status == "vanished":
        ledger.forget(key)
        return outcome
    if status != "done":
        ledger.finish(key, status, error=outcome["error"])
        return outcome
    cand_file = Path(outcome["outputs"][CANDIDATES_OUTPUT]).relative_to(out)
    ledger.finish(
        key,
        "done",
        candidates=outcome["candidates"],
        candidates_file=cand_file.as_posix(),
        wall_s=outcome["wall_s"],
        lookahead=outcome.get("lookahead") and file_key(Path(outcome["lookahead"]), root),
        error=None,
    )
    return outcome


@task(name="coincidence", cache_policy=NO_CACHE)
def coincide_task(ledger: Ledger, root: Path, out: Path, layout: str, pattern: str) -> list:
    """Match the candidates of each beam group across its beams; flag RFI."""
    summaries = coincide_groups(ledger, root, out, layout, pattern)
    for s in summaries:
        get_run_logger().info(
            "group %s: %d candidates in beams %s -> %d after coincidence (%d flagged RFI)%s",
            s["group"], s["candidates_before"], s["beams"], s["candidates_after"],
            s["rfi_flagged"], f"; missing beams {s['missing_beams']}" if s["missing_beams"] else "",
        )  # fmt: skip
    return summaries


def _by_state(outcomes: dict[str, dict[str, Any]], states: tuple[str, ...]) -> dict[str, list]:
    """``{state: [{"file", "error"}, ...]}`` of the files that ended in each state."""
    return {
        state: [
            {"file": k, "error": o["error"]} for k, o in outcomes.items() if o["status"] == state
        ]
        for state in states
    }


def _summary_markdown(summary: dict[str, Any]) -> str:
    lines = [
        f"# Survey of `{summary['incoming']}`",
        "",
        "| files scanned | searched | skipped | done | failed | quarantined | unusable "
        "| candidates (this run) | candidates (total) | bursts (total) | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {summary['scanned']} | {summary['searched']} | {summary['skipped']} "
        f"| {summary['done']} | {len(summary['failed'])} | {len(summary['quarantined'])} "
        f"| {len(summary['unusable'])} | {summary['candidates_this_run']} "
        f"| {summary['candidates_total']} | {summary['bursts_total']} "
        f"| {summary['wall_s']:.2f} |",
    ]
    for kind in ("failed", "quarantined", "unusable"):
        if summary[kind]:
            lines += ["", f"## {kind.capitalize()}", ""]
            lines += [f"- `{item['file']}`: {item['error']}" for item in summary[kind]]
    return "\n".join(lines) + "\n"


def _neighbour_arguments(
    settled: list[Path], todo: list[tuple[str, Path]], ledger: Ledger, root: Path, join: bool
) -> dict[Path, dict[str, Any]]:
    """:func:`search_file_task`'s neighbour arguments for each file to search: the files of
    its beam just before and after it (``join``), and ``lead_in`` where the previous file
    was searched, in an earlier run, without this one after it."""
    neighbours = beam_neighbours(settled) if join and todo else {}
    searching = {path for _, path in todo}
    contexts = {}
    for _, path in todo:
        previous, following = neighbours.get(path, (None, None))
        before = ledger.entries.get(file_key(previous, root)) if previous else None
        lead_in = (previous is not None and previous not in searching and before is not None
                   and before.status == "done" and before.lookahead is None)  # fmt: skip
        contexts[path] = {"previous": str(previous) if previous else None,
                          "following": str(following) if following else None,
                          "lead_in": lead_in}  # fmt: skip
    return contexts


@flow(name="drafts-survey", task_runner=default_task_runner(), validate_parameters=True)
def survey_flow(
    incoming: str,
    out_dir: str,
    options: SurveyOptions = SurveyOptions(),  # noqa: B008 (frozen, safe as a default)
    search: SearchOptions = SearchOptions(),  # noqa: B008
    progress: bool = False,
) -> dict[str, Any]:
    """Search the new observations of ``incoming`` into ``out_dir``; returns a summary."""
    check_run_paths(incoming=incoming, out_dir=out_dir)
    with survey_lock(out_dir, wait=options.wait):
        return _survey(Path(incoming), Path(out_dir), options, search, progress)


def _survey(
    root: Path, out: Path, options: SurveyOptions, search: SearchOptions, progress: bool
) -> dict[str, Any]:
    start = time.perf_counter()
    logger = get_run_logger()
    ledger = Ledger.load(out)
    files = scan(root, options.pattern)
    now = time.time()
    fresh = [p for p in files if not settled(p, options.settle_s, now)]
    if fresh:
        logger.info("not yet settled (changed < %g s ago), left for a later run: %s",
                    options.settle_s, ", ".join(p.name for p in fresh))  # fmt: skip
    todo = [(file_key(p, root), p) for p in files if p not in fresh
            and ledger.needs_search(file_key(p, root), p, options.max_attempts)]  # fmt: skip
    logger.info("%s: %d files, %d to search", root, len(files), len(todo))
    vanished: list[str] = []
    contexts = _neighbour_arguments([p for p in files if p not in fresh], todo, ledger, root,
                                    options.join_files)  # fmt: skip

    def submit(item: tuple[str, Path]) -> Any:
        key, path = item
        try:
            ledger.start(key, path)
        except FileNotFoundError:
            vanished.append(key)
            logger.warning("%s disappeared before its search; skipped", key)
            return None
        return search_file_task.submit(str(path), key, str(out), search, **contexts[path])

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc="survey", unit="file")
    outcomes: dict[str, dict[str, Any]] = {}
    for (key, _), future in submit_bounded(submit, todo, options.max_files):
        outcomes[key] = _record(ledger, key, root, out, future)
        if outcomes[key]["status"] == "vanished":
            vanished.append(key)
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()

    groups = []
    if options.beams:
        groups = coincide_task(ledger, root, out, options.beams, options.beam_pattern)
    done = [(k, out / e.candidates_file) for k, e in ledger.entries.items() if e.status == "done"]
    merged, total = merge_candidate_files(done, out)
    bursts = count_bursts(merged)
    summary = {
        "incoming": str(root),
        "out_dir": str(out),
        "scanned": len(files),
        "searched": len(todo) - len(set(vanished)),
        "skipped": len(files) - len(todo),
        "done": sum(o["status"] == "done" for o in outcomes.values()),
        **_by_state(outcomes, ("failed", "quarantined", "unusable")),
        "unsettled": [p.name for p in fresh],
        "vanished": sorted(set(vanished)),
        "candidates_this_run": sum(o.get("candidates", 0) for o in outcomes.values()),
        "candidates_total": total,
        "bursts_total": bursts,
        "groups": groups,
        "candidates_file": str(merged),
        "ledger": ledger.counts(),
        "wall_s": time.perf_counter() - start,
    }
    write_json_atomic(out / SURVEY_SUMMARY, summary)
    from drafts_ops.survey.index import write_survey_index

    summary["index"] = str(write_survey_index(out, ledger, groups))
    create_markdown_artifact(
        markdown=_summary_markdown(summary),
        key=artifact_key("survey", root.name or "root"),
        description=f"survey of {root}",
    )
    logger.info(
        "survey: %d searched, %d skipped, %d failed, %d quarantined, %d candidates in total",
        summary["searched"],
        summary["skipped"],
        len(summary["failed"]),
        len(summary["quarantined"]),
        total,
    )
    if summary["failed"]:  # the run ends Failed (alerts fire); all other work is kept
        names = ", ".join(item["file"] for item in summary["failed"])
        return Failed(message=f"survey: {len(summary['failed'])} file(s) failed: {names}",
                      data=summary)  # fmt: skip
    return summary
