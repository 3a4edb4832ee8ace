"""The survey's one sequence, without Prefect: search every new observation of a directory,
resumably.

A ledger (``OUT/ledger.json``, :mod:`drafts_ops.survey.ledger`) records each file's state,
so a rerun skips finished files, retries failed ones and finishes what a crash
interrupted. Files that fail validation are quarantined (``OUT/quarantine/`` with a
reason). Each file is searched into its own directory (atomic writes); the survey's
candidate file is rebuilt from those after every run, so no candidate is lost or
duplicated. :func:`run_survey` orders the stages; a :class:`SurveyRunner` runs the file
searches (here one after another; the Prefect flow, ``flows/survey.py``, as concurrent
tasks on its task runner).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from drafts_ops.core.atomic import write_json_atomic
from drafts_ops.core.errors import ObservationError, ParameterError
from drafts_ops.search.config import SearchOptions
from drafts_ops.search.run import run_search
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
from drafts_ops.survey.index import write_survey_index
from drafts_ops.survey.ledger import Ledger
from drafts_ops.survey.options import SurveyOptions

log = logging.getLogger(__name__)

#: The search output that the survey merges (a key of the search's ``write_outputs``).
CANDIDATES_OUTPUT = "csv"
#: The end states of a file that the summary lists with their reasons.
PROBLEM_STATES = ("failed", "quarantined", "unusable")


def search_file(  # noqa: PLR0917 (a task's parameters)
    path: str, key: str, out_dir: str, options: SearchOptions,
    previous: str | None = None, following: str | None = None, lead_in: bool = False,
    logger: logging.Logger | logging.LoggerAdapter = log,
) -> dict[str, Any]:  # fmt: skip
    """Validate and search one file; returns its outcome (never raises for a file's own
    problems: each becomes a ledger state, so one file cannot stop the survey).

    ``previous`` / ``following``: the files of its beam just before and after it, read
    as context (:func:`~drafts_ops.search.plan.plan_search` ``own``); ``lead_in``: the
    previous file was searched without this one, so its last ``delay(d)`` samples are
    searched here. Where the joined search cannot run (a neighbour is unreadable), the
    file is searched alone.

    Outcomes: ``done``; ``quarantined`` (bad format or header: moved aside); ``unusable``
    (data that cannot be searched, e.g. NaNs); ``vanished`` (deleted meanwhile); ``failed``
    (anything else, e.g. permissions or a full disk: retried by later runs).
    """
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
    try:
        run, files = _search_with_neighbours(path, key, out_dir, options,
                                             [f for f in (previous, path, following) if f],
                                             lead_in, logger)  # fmt: skip
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


def _search_with_neighbours(  # noqa: PLR0917
    path: str, key: str, out_dir: str, options: SearchOptions, files: list[str],
    lead_in: bool, logger: logging.Logger | logging.LoggerAdapter,
) -> tuple[Any, list[str]]:  # fmt: skip
    """Search ``path`` with its neighbours ``files`` as context, or alone where that fails;
    returns the search's result and the files it read."""
    out = file_out_dir(out_dir, key)
    run_options = {"trace_memory": options.trace_memory,
                   "keep_intermediates": options.keep_intermediates}  # fmt: skip
    if len(files) > 1:
        try:
            run = run_search(files, out, options.config(), own=files.index(path),
                             lead_in=lead_in, **run_options)  # fmt: skip
            return run, files
        except (ObservationError, ParameterError) as err:
            logger.warning("%s: searched alone, not with its neighbours: %s", key, err)
    return run_search(path, out, options.config(), **run_options), [path]


def record_outcome(
    ledger: Ledger, key: str, root: Path, out: Path, outcome: dict[str, Any] | BaseException
) -> dict[str, Any]:
    """Write one finished file's outcome (or the exception its search raised) into the
    ledger; returns the outcome."""
    if isinstance(outcome, BaseException):  # one file's failure must not stop the survey
        outcome = {"status": "failed", "error": f"{type(outcome).__name__}: {outcome}"}
    status = outcome["status"]
    if status == "vanished":
        ledger.forget(key)
        return outcome
    if status != "done":
        ledger.finish(key, status, error=outcome["error"])
        return outcome
    cand_file = Path(outcome["outputs"][CANDIDATES_OUTPUT]).relative_to(out)
    lookahead = outcome.get("lookahead")
    ledger.finish(key, "done", candidates=outcome["candidates"],
                  candidates_file=cand_file.as_posix(), wall_s=outcome["wall_s"],
                  lookahead=lookahead and file_key(Path(lookahead), root), error=None)  # fmt: skip
    return outcome


def neighbour_arguments(
    settled_files: list[Path], todo: list[tuple[str, Path]], ledger: Ledger, root: Path,
    join: bool,
) -> dict[Path, dict[str, Any]]:  # fmt: skip
    """:func:`search_file`'s neighbour arguments for each file to search: the files of its
    beam just before and after it (``join``), and ``lead_in`` where the previous file was
    searched, in an earlier run, without this one after it."""
    neighbours = beam_neighbours(settled_files) if join and todo else {}
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


class SurveyRunner(Protocol):
    """How :func:`run_survey` runs its file searches and its beam coincidence."""

    def search_files(
        self, search: Callable[..., dict[str, Any]], jobs: Sequence[tuple[str, dict[str, Any]]],
        max_workers: int,
    ) -> Iterable[tuple[str, dict[str, Any] | BaseException]]:  # fmt: skip
        """Run ``search(**kwargs)`` for each ``(key, kwargs)`` job, at most ``max_workers``
        at a time; yield ``(key, outcome or exception)`` as each finishes."""

    def coincide(self, *args: Any) -> list[dict[str, Any]]:
        """Run :func:`~drafts_ops.survey.files.coincide_groups` with ``args``."""


@dataclass
class SerialSurveyRunner:
    """Runs every file's search in this process, one after another."""

    def search_files(
        self, search: Callable[..., dict[str, Any]], jobs: Sequence[tuple[str, dict[str, Any]]],
        max_workers: int,
    ) -> Iterator[tuple[str, dict[str, Any] | BaseException]]:  # fmt: skip
        for key, kwargs in jobs:
            try:
                yield key, search(**kwargs)
            except Exception as err:  # recorded as the file's failure
                yield key, err

    def coincide(self, *args: Any) -> list[dict[str, Any]]:
        return coincide_groups(*args)


def run_survey(
    incoming: str | os.PathLike[str], out_dir: str | os.PathLike[str],
    options: SurveyOptions | None = None, search: SearchOptions | None = None, *,
    runner: SurveyRunner | None = None, progress: Callable[[str], None] | None = None,
    logger: logging.Logger | logging.LoggerAdapter = log,
) -> dict[str, Any]:  # fmt: skip
    """Search the new observations of ``incoming`` into ``out_dir`` (holding the survey's
    lock); returns the run's summary (also written to ``survey_summary.json``).

    ``progress(key)`` is called after each file's search.
    """
    options, search = options or SurveyOptions(), search or SearchOptions()
    with survey_lock(out_dir, wait=options.wait):
        return _survey(Path(incoming), Path(out_dir), options, search,
                       runner or SerialSurveyRunner(), progress, logger)  # fmt: skip


def _survey(  # noqa: PLR0917
    root: Path, out: Path, options: SurveyOptions, search: SearchOptions, runner: SurveyRunner,
    progress: Callable[[str], None] | None, logger: logging.Logger | logging.LoggerAdapter,
) -> dict[str, Any]:  # fmt: skip
    start = time.perf_counter()
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
    contexts = neighbour_arguments([p for p in files if p not in fresh], todo, ledger, root,
                                   options.join_files)  # fmt: skip
    outcomes, vanished = _search_all(todo, contexts, ledger, root, out, search, options,
                                     runner, progress, logger)  # fmt: skip
    groups = []
    if options.beams:
        groups = runner.coincide(ledger, root, out, options.beams, options.beam_pattern)
    summary = _summary(root, out, files, todo, fresh, vanished, outcomes, ledger, groups)
    summary["wall_s"] = time.perf_counter() - start
    write_json_atomic(out / SURVEY_SUMMARY, summary)
    summary["index"] = str(write_survey_index(out, ledger, groups, waiting=summary["unsettled"],
                                              beam_pattern=options.beam_pattern))  # fmt: skip
    logger.info("survey: %d searched, %d skipped, %d failed, %d quarantined, %d candidates "
                "in total", summary["searched"], summary["skipped"], len(summary["failed"]),
                len(summary["quarantined"]), summary["candidates_total"])  # fmt: skip
    return summary


def _search_all(  # noqa: PLR0917
    todo: list[tuple[str, Path]], contexts: dict[Path, dict[str, Any]], ledger: Ledger,
    root: Path, out: Path, search: SearchOptions, options: SurveyOptions,
    runner: SurveyRunner, progress: Callable[[str], None] | None,
    logger: logging.Logger | logging.LoggerAdapter,
) -> tuple[dict[str, dict[str, Any]], list[str]]:  # fmt: skip
    """Search every file of ``todo`` (each started in the ledger first); their outcomes by
    key, and the keys of files that vanished."""
    vanished: list[str] = []
    jobs = []
    for key, path in todo:
        try:
            ledger.start(key, path)
        except FileNotFoundError:
            vanished.append(key)
            logger.warning("%s disappeared before its search; skipped", key)
            continue
        jobs.append((key, {"path": str(path), "key": key, "out_dir": str(out),
                           "options": search, **contexts[path]}))  # fmt: skip
    outcomes: dict[str, dict[str, Any]] = {}
    for key, result in runner.search_files(search_file, jobs, options.max_files):
        outcomes[key] = record_outcome(ledger, key, root, out, result)
        if outcomes[key]["status"] == "vanished":
            vanished.append(key)
        if progress is not None:
            progress(key)
    return outcomes, vanished


def _summary(  # noqa: PLR0917
    root: Path, out: Path, files: list[Path], todo: list, fresh: list[Path],
    vanished: list[str], outcomes: dict[str, dict[str, Any]], ledger: Ledger, groups: list,
) -> dict[str, Any]:  # fmt: skip
    """The run's summary: files per state, candidates, bursts and the merged candidates."""
    done = [(k, out / e.candidates_file) for k, e in ledger.entries.items() if e.status == "done"]
    merged, total = merge_candidate_files(done, out)
    problems = {state: [{"file": k, "error": o["error"]} for k, o in outcomes.items()
                        if o["status"] == state] for state in PROBLEM_STATES}  # fmt: skip
    return {
        "incoming": str(root),
        "out_dir": str(out),
        "scanned": len(files),
        "attempted": len(todo) - len(set(vanished)),
        "searched": sum(o["status"] == "done" for o in outcomes.values()),
        "skipped": len(files) - len(todo),
        "done": sum(o["status"] == "done" for o in outcomes.values()),
        **problems,
        "unsettled": [p.name for p in fresh],
        "vanished": sorted(set(vanished)),
        "candidates_this_run": sum(o.get("candidates", 0) for o in outcomes.values()),
        "candidates_total": total,
        "bursts_total": count_bursts(merged),
        "groups": groups,
        "candidates_file": str(merged),
        "ledger": ledger.counts(),
    }


def summary_markdown(summary: dict[str, Any]) -> str:
    """A survey run's summary as markdown (a Prefect artifact, a notification)."""
    lines = [
        f"# Survey of `{summary['incoming']}`",
        "",
        "| files scanned | attempted | searched | skipped | failed | quarantined | unusable "
        "| candidates (this run) | candidates (total) | bursts (total) | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {summary['scanned']} | {summary['attempted']} | {summary['searched']} "
        f"| {summary['skipped']} | {len(summary['failed'])} | {len(summary['quarantined'])} "
        f"| {len(summary['unusable'])} | {summary['candidates_this_run']} "
        f"| {summary['candidates_total']} | {summary['bursts_total']} "
        f"| {summary['wall_s']:.2f} |",
    ]
    for kind in PROBLEM_STATES:
        if summary[kind]:
            lines += ["", f"## {kind.capitalize()}", ""]
            lines += [f"- `{item['file']}`: {item['error']}" for item in summary[kind]]
    return "\n".join(lines) + "\n"
