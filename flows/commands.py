"""``drafts search | survey | validate | deploy | trigger``: the flows on the command line.

Registered through the ``drafts_ops.commands`` entry point (see pyproject.toml), so the
science CLI never imports Prefect. Flows run on Prefect's embedded (ephemeral) API unless
``PREFECT_API_URL`` names a server. Prefect is imported inside the handlers only, keeping
``drafts --help`` fast. A new flow command adds its ``add_*_parser`` function to
:data:`PARSERS`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from drafts_ops.cli.common import add_dm_range_arguments, add_stream_arguments
from drafts_ops.cli.options import add_option_arguments, option_groups, options_from_args
from drafts_ops.core import interrupts
from drafts_ops.core.errors import ParameterError
from drafts_ops.search.config import SearchOptions
from drafts_ops.survey.options import SurveyOptions

RUNNER_CHOICES = ("threads", "dask")
#: Seconds the embedded API may take to start: its first start creates the SQLite database
#: (about 120 migrations), which takes longer than Prefect's default on a busy machine.
EPHEMERAL_STARTUP_TIMEOUT_S = "300"


def _prepare_api(*, local: bool = True) -> None:
    """The Prefect API of this command (call before importing prefect): the user's
    (``PREFECT_API_URL``), else the local one that outlives the command
    (:mod:`flows.api`; not for ``local=False``: deploy and trigger need a lasting server),
    else (``DRAFTS_API=temporary``) Prefect's temporary server.

    Telemetry and analytics are off: an offline machine (most telescope sites) would log a
    traceback for each failed attempt to send them.
    """
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    from flows.api import use_local_api

    if not local or use_local_api() is None:
        os.environ.setdefault(
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", EPHEMERAL_STARTUP_TIMEOUT_S
        )
        _embedded_server_dies_with_us()
    _interrupts_stay_ours()


def _interrupts_stay_ours() -> None:
    """Keep this command's SIGTERM handler (:mod:`drafts_ops.core.interrupts`) during flow
    runs: Prefect's engine would swap in its own, whose clean-up waits for the running task
    to finish (minutes) before the process may exit."""
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    import contextlib

    from prefect import flow_engine

    flow_engine.capture_sigterm = contextlib.nullcontext


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """In a child process: ask Linux for SIGTERM when the parent dies (PR_SET_PDEATHSIG)."""
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    import contextlib
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))


def _embedded_server_dies_with_us() -> None:
    """Make Prefect's temporary API server (a uvicorn subprocess) end with this process.

    Prefect stops it at exit (atexit), which a SIGKILL skips: the server was then left
    running for good. On Linux the child now gets SIGTERM when we die, however we die.
    """
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    import subprocess

    from prefect.server.api import server

    cls = server.SubprocessASGIServer
    if getattr(cls, "_drafts_patched", False):
        return
    original = cls._run_uvicorn_command

    def run_uvicorn(self):
        real_popen = subprocess.Popen

        def popen(*args, **kwargs):
            if sys.platform.startswith("linux"):
                kwargs.setdefault("preexec_fn", _die_with_parent)
            return real_popen(*args, **kwargs)

        server.subprocess.Popen = popen
        try:
            return original(self)
        finally:
            server.subprocess.Popen = real_popen

    cls._run_uvicorn_command = run_uvicorn
    cls._drafts_patched = True


def _check_inputs(files: list[Path], out: Path | None = None) -> None:
    """Before any server starts: every file opens (its header is read) and ``out`` can be
    written; a problem raises one line naming the file."""
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    from drafts_ops.io import open_observation

    for path in files:
        with open_observation(path):
            pass
    if out is not None:
        existing = next((p for p in (out, *out.parents) if p.exists()), Path())
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            raise ParameterError(f"{out}: cannot write there ({existing} is not a writable "
                                 "directory)")  # fmt: skip


def _add_runner_arguments(parser: argparse._ActionsContainer) -> None:
    parser.add_argument(
        "--task-runner",
        choices=RUNNER_CHOICES,
        default="threads",
        help="where tasks run: a bounded thread pool or a Dask cluster (deploy/dask.yaml)",
    )
    parser.add_argument(
        "--dask-address", default=None, help="Dask scheduler, e.g. tcp://host:8786 (with dask)"
    )


def _runner(args: argparse.Namespace, max_workers: int):
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    from flows.runners import check_scheduler, make_task_runner

    runner = make_task_runner(
        args.task_runner, max_workers=max_workers, dask_address=args.dask_address
    )
    if getattr(runner, "address", None):  # an existing cluster: is it there?
        check_scheduler(runner.address)
    return runner


# -- search ---------------------------------------------------------------------------------


def add_search_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "search",
        help="search observations for dispersed pulses (Prefect flow)",
        description="Search each FILE (or the shipped demo observation with --demo) and write "
        "candidates, plots and perf.json into --out (one sub-folder per file when several; "
        "--join: consecutive files of one observation searched as one).",
    )
    groups = option_groups(p)
    given = groups["input"]
    given.add_argument("files", nargs="*", type=Path, metavar="FILE",
                       help="observations to search")  # fmt: skip
    given.add_argument("--demo", action="store_true", help="search the shipped demo observation")
    given.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    given.add_argument("--join", action="store_true",
                       help="the FILEs are consecutive files of one observation (a PSRFITS "
                       "sequence, or files of one beam that follow each other without a gap): "
                       "search them as one stream into --out, so that a burst across a "
                       "boundary is found once")  # fmt: skip
    add_option_arguments(p, SearchOptions, groups)
    _add_runner_arguments(groups["execution"])
    groups["execution"].add_argument("--no-progress", dest="progress", action="store_false",
                                     help="no progress bars")  # fmt: skip
    p.set_defaults(func=run_search)


def _search_targets(args: argparse.Namespace) -> list[tuple[Path | list[Path], Path]]:
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    from drafts_ops.core.resources import resource_path

    files = list(args.files)
    if args.demo:
        files.append(resource_path("data", "demo.fil"))
    if not files:
        raise ParameterError("give at least one FILE, or --demo")
    if len(files) == 1:
        return [(files[0], args.out)]
    if args.join:
        return [(files, args.out)]
    stems = [f.stem for f in files]
    if len(set(stems)) < len(stems):
        raise ParameterError("several FILEs share a name; search them into separate --out")
    return [(f, args.out / f.stem) for f in files]


def run_search(args: argparse.Namespace) -> int:
    options = options_from_args(SearchOptions, args)
    targets = _search_targets(args)
    _check_inputs([f for path, _ in targets for f in (path if isinstance(path, list) else [path])],
                  args.out)  # fmt: skip
    # lazy: keeps drafts --help fast
    from drafts_ops.search.outputs import DONE_FILE

    def unfinished() -> str:
        done = [out for _, out in targets if (out / DONE_FILE).exists()]
        left = [str(out) for _, out in targets if out not in done]
        return (f"{', '.join(left)} left unfinished (no {DONE_FILE}); run again to redo it"
                if left else f"{args.out} was already complete")  # fmt: skip

    interrupts.set_note(unfinished)
    _prepare_api()
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    from flows.search import search_flow

    flow = search_flow.with_options(task_runner=_runner(args, options.max_workers))
    for path, out in _progress(targets, args.progress and len(targets) > 1, "files"):
        source = [str(f) for f in path] if isinstance(path, list) else str(path)
        result = flow(source, str(out), options, progress=args.progress)
        name = " + ".join(map(str, path)) if isinstance(path, list) else path
        print(closing_line(name, result))
    return 0


def closing_line(name: object, result: dict) -> str:
    """What a search wrote, in one line: counts, speed (marked when the kernels compiled
    during it) and the report page."""
    compiling = ", including the kernels' first compilation" if result.get("compiling") else ""
    kept = f", {result['bursts']} kept by the classifier" if "bursts" in result else ""
    return (f"{name}: {result['candidates']} candidates{kept}, {result.get('plots', 0)} plots "
            f"in {result['wall_s']:.2f} s (real-time x{result['realtime_factor']:.2f}"
            f"{compiling}); report {result.get('report') or result['out_dir']}")  # fmt: skip


def _progress(items: list, enabled: bool, unit: str):
    if not enabled:
        return items
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    from tqdm import tqdm

    return tqdm(items, unit=unit.rstrip("s"), desc=unit)


# -- survey ---------------------------------------------------------------------------------


def add_survey_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "survey",
        help="search every new observation in a directory (resumable; Prefect flow)",
        description="Search the files of DIR matching --pattern that the ledger in --out has "
        "not finished; quarantine unreadable files; merge all candidates.",
    )
    groups = option_groups(p)
    given = groups["input"]
    given.add_argument("incoming", type=Path, metavar="DIR", help="directory of new observations")
    given.add_argument("--out", type=Path, required=True, metavar="DIR", help="survey output dir")
    add_option_arguments(p, SurveyOptions, groups)
    add_option_arguments(p, SearchOptions, groups)
    _add_runner_arguments(groups["execution"])
    groups["execution"].add_argument("--no-progress", dest="progress", action="store_false",
                                     help="no progress bars")  # fmt: skip
    p.set_defaults(func=run_survey)


def run_survey(args: argparse.Namespace) -> int:
    options = options_from_args(SurveyOptions, args)
    search = options_from_args(SearchOptions, args)
    if not args.incoming.is_dir():
        raise ParameterError(f"{args.incoming}: no such directory")
    _check_inputs([], args.out)
    interrupts.set_note("files finished so far are kept; run the survey again to resume")
    _prepare_api()
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    from flows.survey import survey_flow

    flow = survey_flow.with_options(task_runner=_runner(args, options.max_files))
    state = flow(str(args.incoming), str(args.out), options, search, progress=args.progress,
                 return_state=True)  # fmt: skip
    summary = state.result(raise_on_failure=False)
    if isinstance(summary, BaseException):  # an error of the survey itself, not of a file
        raise summary
    print(
        f"{summary['searched']} searched, {summary['skipped']} skipped, "
        f"{len(summary['failed'])} failed, {len(summary['quarantined'])} quarantined, "
        f"{len(summary['unusable'])} unusable, {len(summary['unsettled'])} not yet settled; "
        f"{summary['candidates_total']} candidates in {summary['candidates_file']}"
    )
    for kind in ("failed", "quarantined", "unusable"):
        for item in summary[kind]:
            print(f"  {kind} {item['file']}: {item['error']}", file=sys.stderr)
    return 1 if summary["failed"] else 0


# -- validate -------------------------------------------------------------------------------


def add_validate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="validate production dedispersion against the prototype (HTML/MD/JSON report)",
        description="Dedisperse each FILE with the prototype kernel and every production "
        "algorithm (streamed, same overlap), compare them (parity, S/N at bursts, candidates, "
        "performance) and write validation.html, .md and .json into --out. Exit status 0: "
        "pass, 1: fail, 2: error.",
    )
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="observations to check")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="report directory")
    add_dm_range_arguments(p, dm_max=1000.0)
    p.add_argument("--dm-ranges", action=argparse.BooleanOptionalAction, default=True,
                   help="validate each of the search's DM ranges at its own time resolution "
                   "(drafts plan); --no-dm-ranges: one plan at the file's resolution")  # fmt: skip
    p.add_argument("--algorithms", nargs="+", default=None, metavar="ALG",
                   help="production algorithms to check (default: all registered)")  # fmt: skip
    add_stream_arguments(p)
    p.add_argument("--max-samples", type=int, default=None, help="only the first N samples")
    p.add_argument("--repeats", type=int, default=1, help="timed passes per path (fastest kept)")
    p.add_argument("--inject-fault", default=None, metavar="DM_INDEX,CHANNEL[,SHIFT[,ALG]]",
                   help="self-test: break one production delay; the report must fail")  # fmt: skip
    p.set_defaults(func=run_validate)


def run_validate(args: argparse.Namespace) -> int:
    _check_inputs(list(args.files), args.out)
    _prepare_api()
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    from flows.validate import validate_flow

    state = validate_flow(
        return_state=True,
        files=[str(f) for f in args.files],
        out_dir=str(args.out),
        dm_min=args.dm_min,
        dm_max=args.dm_max,
        dm_step=args.dm_step,
        dm_ranges=args.dm_ranges,
        algorithms=args.algorithms,
        backend=args.backend,
        block_size=args.block_size,
        max_samples=args.max_samples,
        repeats=args.repeats,
        delay_fault=args.inject_fault,
    )
    summary = state.result(raise_on_failure=False)
    if isinstance(summary, BaseException):  # an error, not a failed check
        raise summary
    for line in summary["verdict"]:
        print(line)
    print(f"validation {'PASS' if summary['passed'] else 'FAIL'}: {summary['reports']['html']}")
    return 0 if summary["passed"] else 1


# -- deploy and trigger -----------------------------------------------------------------------


def add_deploy_parser(sub: argparse._SubParsersAction) -> None:
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    from flows.deploy import PREFECT_YAML

    p = sub.add_parser(
        "deploy",
        help="register the deployments of deploy/prefect.yaml with the Prefect API",
        description="Register deployments (schedules, concurrency limits, work pool) with "
        "the API in PREFECT_API_URL; creates the work pool if missing. Start a worker with "
        "`prefect worker start --pool drafts-process`.",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="deployments to register (all)")
    p.add_argument("--file", type=Path, default=PREFECT_YAML, help="prefect.yaml to read")
    p.add_argument("--set", action="append", default=[], metavar="NAME.PARAM=VALUE",
                   help="a deployment parameter, e.g. survey.incoming=/data/in (paths are "
                   "made absolute; repeatable)")  # fmt: skip
    p.set_defaults(func=run_deploy)


def run_deploy(args: argparse.Namespace) -> int:
    _prepare_api(local=False)
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    from prefect.settings import PREFECT_API_URL

    from flows.deploy import parse_params, register_deployments

    if not PREFECT_API_URL.value():
        raise ParameterError(
            "PREFECT_API_URL is not set: deployments would go into a temporary server that "
            "vanishes when this command ends; point it at your Prefect server "
            "(e.g. export PREFECT_API_URL=http://127.0.0.1:4200/api)"
        )
    results = register_deployments(args.file, args.names or None, parse_params(args.set))
    for name, outcome in results.items():
        print(f"{name}: {outcome}")
    return 0


def add_trigger_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trigger",
        help="start a run of a deployment through the Prefect API; prints the run id",
        description="Schedule a run of DEPLOYMENT (flow-name/deployment-name, e.g. "
        "drafts-search/search) now, without waiting for it.",
    )
    p.add_argument("deployment", metavar="DEPLOYMENT")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="flow parameter (JSON value or string); dotted keys set model fields, "
        "e.g. options.dm_max=500",
    )
    p.add_argument("--json", action="store_true", help="print {'flow_run_id': ...} as JSON")
    p.add_argument("--wait", action="store_true",
                   help="follow the run to its end; exit 0: completed, 1: not")  # fmt: skip
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="with --wait: give up after S seconds (exit 3)")  # fmt: skip
    p.set_defaults(func=run_trigger)


def run_trigger(args: argparse.Namespace) -> int:
    _prepare_api(local=False)
    # lazy: Prefect loads only for a flow command, keeping drafts --help fast
    from flows.deploy import parse_params, trigger, wait_for

    run_id = trigger(args.deployment, parse_params(args.param))
    print(json.dumps({"flow_run_id": run_id}) if args.json else run_id, flush=True)
    if not args.wait:
        return 0
    state = wait_for(run_id, timeout_s=args.timeout)
    print(state_line(args.deployment, run_id, state), file=sys.stderr)
    if state is None or not state.is_final():
        return 3
    return 0 if state.is_completed() else 1


# -- server -----------------------------------------------------------------------------------


def add_server_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "server",
        help="the local Prefect API that search, survey and validate share (start/stop/status)",
        description="search, survey and validate use a local Prefect API that the first of "
        "them starts in the background and later ones reuse (its database under "
        "DRAFTS_HOME, default ~/.local/share/drafts-ops); it stops after DRAFTS_API_IDLE_S "
        "seconds unused (1800). PREFECT_API_URL, when set, is used instead; "
        "DRAFTS_API=temporary gives each command a temporary server of its own.",
    )
    p.add_argument("action", choices=("start", "stop", "status"))
    p.set_defaults(func=run_server)


def run_server(args: argparse.Namespace) -> int:
    # lazy: keeps drafts --help fast
    import time

    from flows.api import api_dir, ensure_server, live_clients, stop_server, user_api_url

    directory = api_dir()
    if args.action == "start":
        state = ensure_server(lambda line: print(line, file=sys.stderr))
        print(f"local Prefect API at {state.url} (pid {state.pid})")
    elif args.action == "stop":
        state = stop_server(directory)
        print("stopped the local Prefect API" if state else "no local Prefect API was running")
    else:
        from flows.api import ServerState

        state = ServerState.read(directory)
        if state is None:
            print(f"no local Prefect API running ({directory})")
        else:
            up, using = (time.time() - state.started) / 60, len(live_clients(directory))
            print(f"local Prefect API at {state.url} (pid {state.pid}), up {up:.1f} min, "
                  f"{using} command(s) using it; database in {directory}")  # fmt: skip
        if user_api_url():
            print(f"flows use PREFECT_API_URL={user_api_url()} instead")
        return 0 if state is not None else 1
    return 0


def state_line(deployment: str, run_id: str, state) -> str:
    """A followed run's end in one line: its state and, unless it completed, the first line
    of its state's message (the exception that failed it)."""
    if state is None:
        return f"{deployment} run {run_id}: unknown"
    message = (state.message or "").strip().splitlines()
    why = f": {message[0]}" if message and not state.is_completed() else ""
    return f"{deployment} run {run_id}: {state.name}{why}"


#: Sub-command builders this package contributes, in ``drafts --help`` order.
PARSERS: list[Callable[[argparse._SubParsersAction], None]] = [
    add_search_parser,
    add_survey_parser,
    add_validate_parser,
    add_deploy_parser,
    add_trigger_parser,
    add_server_parser,
]


def register(sub: argparse._SubParsersAction) -> None:
    """Entry point ``drafts_ops.commands``: add the flow sub-commands to ``drafts``."""
    for add in PARSERS:
        add(sub)
