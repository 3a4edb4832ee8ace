"""Task runners for the flows: a bounded thread pool by default, Dask when asked.

The Dask settings are data (``deploy/dask.yaml``, see the comments there). A flow picks its
runner at import time from the environment (``DRAFTS_TASK_RUNNER=threads|dask``,
``DRAFTS_MAX_WORKERS``), which is how a deployment run by a worker chooses; the CLI and
tests call :func:`make_task_runner` and ``flow.with_options(task_runner=...)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import yaml
from prefect.futures import PrefectFuture, as_completed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from drafts_ops.core.errors import ParameterError
from flows import DEPLOY_DIR

RunnerKind = Literal["threads", "dask"]
DEFAULT_DASK_CONFIG = DEPLOY_DIR / "dask.yaml"


def load_dask_config(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The Dask runner settings: ``path``, else ``$DRAFTS_DASK_CONFIG``, else deploy/dask.yaml."""
    path = Path(path or os.environ.get("DRAFTS_DASK_CONFIG") or DEFAULT_DASK_CONFIG)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ParameterError(f"{path}: cannot read Dask configuration: {err}") from None
    if not isinstance(config, dict):
        raise ParameterError(f"{path}: Dask configuration must be a mapping")
    return config


def make_task_runner(
    kind: RunnerKind = "threads",
    *,
    max_workers: int = 2,
    dask_address: str | None = None,
    dask_config: str | os.PathLike[str] | None = None,
) -> TaskRunner:
    """A task runner: ``ThreadPoolTaskRunner(max_workers)`` or a configured ``DaskTaskRunner``.

    For Dask the scheduler address is ``dask_address``, else ``$DRAFTS_DASK_ADDRESS``, else
    the configuration's ``address``; with none, a temporary ``LocalCluster`` is started
    with the configuration's ``local_cluster`` arguments.
    """
    if kind == "threads":
        return ThreadPoolTaskRunner(max_workers=max_workers)
    if kind != "dask":
        raise ParameterError(f"unknown task runner {kind!r}: use threads or dask")
    from prefect_dask import DaskTaskRunner

    config = load_dask_config(dask_config)
    address = dask_address or os.environ.get("DRAFTS_DASK_ADDRESS") or config.get("address")
    client_kwargs = config.get("client") or {}
    if address:
        return DaskTaskRunner(address=address, client_kwargs=client_kwargs)
    cluster = dict(config.get("local_cluster") or {})
    if cluster.get("processes", True):  # TCP between processes: this machine only, unless told
        cluster.setdefault("host", "127.0.0.1")
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs=cluster,
        adapt_kwargs=config.get("adapt") or None,
        client_kwargs=client_kwargs,
    )


def check_scheduler(address: str, timeout_s: float = 5.0) -> None:
    """One clear error when the Dask scheduler at ``address`` (``tcp://host:port``) does not
    answer within ``timeout_s`` (instead of a 30 s hang and a long traceback)."""
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(address if "://" in address else f"tcp://{address}")
    if parsed.scheme not in ("tcp", "tls") or parsed.port is None:
        raise ParameterError(f"Dask scheduler address {address!r}: expected tcp://HOST:PORT")
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=timeout_s):
            pass
    except OSError as err:
        raise ParameterError(
            f"cannot reach the Dask scheduler at {address}: {err.strerror or err}; start it "
            "(dask scheduler) or fix --dask-address / DRAFTS_DASK_ADDRESS"
        ) from None


def default_task_runner() -> TaskRunner:
    """The runner a flow gets at import: from ``DRAFTS_TASK_RUNNER`` and ``DRAFTS_MAX_WORKERS``."""
    kind = os.environ.get("DRAFTS_TASK_RUNNER", "threads")
    workers = int(os.environ.get("DRAFTS_MAX_WORKERS", "2"))
    return make_task_runner(kind, max_workers=workers)  # type: ignore[arg-type]


def runner_name(runner: TaskRunner) -> str:
    """Short description of a runner for logs and perf.json."""
    workers = getattr(runner, "_max_workers", None) or getattr(runner, "max_workers", None)
    return f"{type(runner).__name__}({workers})" if workers else type(runner).__name__


def submit_bounded(
    submit: Callable[[Any], PrefectFuture], items: Iterable[Any], limit: int
) -> Iterator[tuple[Any, PrefectFuture]]:
    """Submit ``submit(item)`` for each item with at most ``limit`` unfinished at a time.

    Yields ``(item, future)`` as futures finish (completion order), whatever the task
    runner: the bound holds on a thread pool and on a Dask cluster alike. Items for which
    ``submit`` returns ``None`` are skipped.
    """
    if limit < 1:
        raise ParameterError(f"concurrency limit {limit} must be >= 1")
    pending: dict[PrefectFuture, Any] = {}
    for item in items:
        if len(pending) >= limit:
            done = next(as_completed(list(pending)))
            yield pending.pop(done), done
        future = submit(item)
        if future is None:  # the caller decided not to run this item after all
            continue
        pending[future] = item
    for done in as_completed(list(pending)):
        yield pending.pop(done), done
