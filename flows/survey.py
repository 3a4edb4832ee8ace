"""The survey flow: :func:`drafts_ops.survey.sequence.run_survey` with each file's search a
Prefect task (concurrent, at most ``options.max_files`` at a time, on the flow's task
runner), its beam coincidence a task, and its summary a markdown artifact. A run in which
a file failed ends Failed (alerts fire), with all other work kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed

from drafts_ops.search.config import SearchOptions
from drafts_ops.survey.files import coincide_groups
from drafts_ops.survey.options import SurveyOptions
from drafts_ops.survey.sequence import run_survey, search_file, summary_markdown
from flows.deploy import check_run_paths
from flows.runners import default_task_runner, submit_bounded
from flows.search import artifact_key, retry_on_io_error


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
    """:func:`~drafts_ops.survey.sequence.search_file`, logging to the task run."""
    return search_file(path, key, out_dir, options, previous, following, lead_in,
                       logger=get_run_logger())  # fmt: skip


@task(name="coincidence", cache_policy=NO_CACHE)
def coincide_task(*args: Any) -> list:
    """Match the candidates of each beam group across its beams; flag RFI."""
    summaries = coincide_groups(*args)
    for s in summaries:
        get_run_logger().info(
            "group %s: %d candidates in beams %s -> %d after coincidence (%d flagged RFI)%s",
            s["group"], s["candidates_before"], s["beams"], s["candidates_after"],
            s["rfi_flagged"], f"; missing beams {s['missing_beams']}" if s["missing_beams"] else "",
        )  # fmt: skip
    return summaries


class PrefectSurveyRunner:
    """Runs a survey's file searches as concurrent Prefect tasks."""

    def search_files(
        self, search: Callable[..., dict[str, Any]], jobs: Sequence[tuple[str, dict[str, Any]]],
        max_workers: int,
    ) -> Iterator[tuple[str, dict[str, Any] | BaseException]]:  # fmt: skip
        def submit(job: tuple[str, dict[str, Any]]) -> Any:
            return search_file_task.submit(**job[1])

        for (key, _), future in submit_bounded(submit, jobs, max_workers):
            try:
                yield key, future.result()
            except Exception as err:  # recorded as the file's failure
                yield key, err

    def coincide(self, *args: Any) -> list[dict[str, Any]]:
        return coincide_task(*args)


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
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(desc="survey", unit="file")
    try:
        summary = run_survey(incoming, out_dir, options, search, runner=PrefectSurveyRunner(),
                             progress=(lambda _key: bar.update()) if bar is not None else None,
                             logger=get_run_logger())  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
    name = Path(summary["incoming"]).name or "root"
    create_markdown_artifact(markdown=summary_markdown(summary), key=artifact_key("survey", name),
                             description=f"survey of {summary['incoming']}")  # fmt: skip
    if summary["failed"]:  # the run ends Failed (alerts fire); all other work is kept
        names = ", ".join(item["file"] for item in summary["failed"])
        return Failed(message=f"survey: {len(summary['failed'])} file(s) failed: {names}",
                      data=summary)  # fmt: skip
    return summary
