"""Register the deployments of ``deploy/prefect.yaml`` with a Prefect API.

``drafts deploy`` calls :func:`register_deployments`: for each deployment in the file it
imports the flow named by its entrypoint, builds ``flow.to_deployment(...)`` with the
file's schedules, concurrency limit, parameters and work pool, creates the work pool if it
does not exist (type ``process``) and applies the deployment to the API in
``PREFECT_API_URL`` (or the embedded one). Deployments are registered with module-path
entrypoints (``flows.survey.survey_flow``), so a worker needs drafts-ops installed, not the
checkout. A deployment whose flow cannot be imported is skipped and reported.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from drafts_ops.cli.common import parse_params  # noqa: F401 (re-exported for the CLI)
from drafts_ops.core.errors import DraftsError
from flows import DEPLOY_DIR

PREFECT_YAML = DEPLOY_DIR / "prefect.yaml"


@dataclass(frozen=True)
class DeploymentSpec:
    """One deployment of ``prefect.yaml`` (the fields drafts-ops uses)."""

    name: str
    entrypoint: str
    description: str = ""
    tags: tuple[str, ...] = ()
    parameters: dict[str, Any] = field(default_factory=dict)
    schedules: tuple[dict[str, Any], ...] = ()
    concurrency_limit: int | None = None
    work_pool: dict[str, Any] = field(default_factory=dict)

    @property
    def module_entrypoint(self) -> tuple[str, str]:
        """``("flows.survey", "survey_flow")`` for ``flows/survey.py:survey_flow``."""
        try:
            file_part, attr = self.entrypoint.split(":")
        except ValueError:
            raise DraftsError(
                f"deployment {self.name}: bad entrypoint {self.entrypoint!r}"
            ) from None
        return Path(file_part).with_suffix("").as_posix().replace("/", "."), attr


def load_specs(path: str | os.PathLike[str] = PREFECT_YAML) -> list[DeploymentSpec]:
    """The deployments declared in a ``prefect.yaml``."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        specs = []
        for item in doc["deployments"]:
            specs.append(
                DeploymentSpec(
                    name=item["name"],
                    entrypoint=item["entrypoint"],
                    description=item.get("description") or "",
                    tags=tuple(item.get("tags") or ()),
                    parameters=dict(item.get("parameters") or {}),
                    schedules=tuple(item.get("schedules") or ()),
                    concurrency_limit=item.get("concurrency_limit"),
                    work_pool=dict(item.get("work_pool") or {}),
                )
            )
    except (OSError, yaml.YAMLError, KeyError, TypeError) as err:
        raise DraftsError(f"{path}: cannot read deployments: {err}") from None
    return specs


def load_flow(spec: DeploymentSpec) -> Any:
    """Import the flow object of ``spec``'s entrypoint."""
    module_name, attr = spec.module_entrypoint
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise DraftsError(f"deployment {spec.name}: {module_name} has no {attr}") from None


def _schedules(spec: DeploymentSpec) -> list[Any]:
    from prefect.schedules import Cron, Interval

    out = []
    for item in spec.schedules:
        common = {"timezone": item.get("timezone"), "active": item.get("active", True)}
        if "cron" in item:
            out.append(Cron(item["cron"], **common))
        elif "interval" in item:
            out.append(Interval(item["interval"], **common))
        else:
            raise DraftsError(f"deployment {spec.name}: schedule {item} has no cron or interval")
    return out


def ensure_work_pool(name: str, pool_type: str = "process") -> None:
    """Create the work pool ``name`` (with the worker type's default job template) if missing."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound
    from prefect.workers.process import ProcessWorker

    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(name)
        except ObjectNotFound:
            template = (
                ProcessWorker.get_default_base_job_template() if pool_type == "process" else {}
            )
            client.create_work_pool(
                WorkPoolCreate(name=name, type=pool_type, base_job_template=template)
            )


def build_deployment(spec: DeploymentSpec) -> Any:
    """The ``RunnerDeployment`` of ``spec`` (not yet registered)."""
    from prefect.deployments.runner import EntrypointType

    pool = spec.work_pool
    flow = load_flow(spec)
    check_parameters(spec, flow)
    return flow.to_deployment(
        name=spec.name,
        description=spec.description or None,
        tags=list(spec.tags),
        parameters=spec.parameters,
        schedules=_schedules(spec),
        concurrency_limit=spec.concurrency_limit,
        work_pool_name=pool.get("name"),
        work_queue_name=pool.get("work_queue_name"),
        job_variables=pool.get("job_variables") or {},
        entrypoint_type=EntrypointType.MODULE_PATH,
    )


def check_parameters(spec: DeploymentSpec, flow: Any) -> None:
    """Validate ``spec``'s parameters against the flow's options models before anything is
    registered: a bad option in ``prefect.yaml`` or ``--set`` is one line naming the
    deployment, the parameter and the option, not a run that fails at 3 a.m."""
    import inspect
    import typing

    from drafts_ops.core.errors import OptionError
    from drafts_ops.core.options import Options

    hints = typing.get_type_hints(flow.fn)
    known = set(inspect.signature(flow.fn).parameters)
    unknown = sorted(set(spec.parameters) - known)
    if unknown:
        raise DraftsError(f"deployment {spec.name}: unknown parameter(s) {', '.join(unknown)} "
                          f"(the flow takes {', '.join(sorted(known))})")  # fmt: skip
    for name, value in spec.parameters.items():
        model = hints.get(name)
        if isinstance(model, type) and issubclass(model, Options) and isinstance(value, dict):
            try:
                model(**value)
            except OptionError as err:
                raise DraftsError(f"deployment {spec.name}: parameter {name}: {err}") from None


#: Parameters a scheduled deployment cannot run without (its schedule stays paused until
#: they are set), by deployment name.
REQUIRED_FOR_SCHEDULE: dict[str, tuple[str, ...]] = {"survey": ("incoming", "out_dir")}


def apply_settings(specs: list[DeploymentSpec], settings: dict[str, Any]) -> list[DeploymentSpec]:
    """Deployment parameters from ``{name: {param: value}}`` (e.g. from ``--set
    survey.incoming=/data/in``), paths made absolute; a scheduled deployment missing a
    required parameter is registered with its schedules paused."""
    import dataclasses

    names = {s.name for s in specs}
    unknown = sorted(set(settings) - names)
    if unknown:
        raise DraftsError(f"--set: no deployment(s) named {', '.join(unknown)}")
    out = []
    for spec in specs:
        params = absolute_paths({**spec.parameters, **settings.get(spec.name, {})})
        missing = [k for k in REQUIRED_FOR_SCHEDULE.get(spec.name, ()) if k not in params]
        schedules = [{**item, "active": item.get("active", True) and not missing}
                     for item in spec.schedules]  # fmt: skip
        out.append(dataclasses.replace(spec, parameters=params, schedules=schedules))
    return out


def paused_reason(spec: DeploymentSpec) -> str:
    """Why ``spec``'s schedules are paused ('' when they are not)."""
    missing = [k for k in REQUIRED_FOR_SCHEDULE.get(spec.name, ()) if k not in spec.parameters]
    if not missing or not spec.schedules:
        return ""
    flags = " ".join(f"--set {spec.name}.{k}=PATH" for k in missing)
    return f"schedule PAUSED until {', '.join(missing)} set ({flags})"


def register_deployments(
    path: str | os.PathLike[str] = PREFECT_YAML,
    names: list[str] | None = None,
    settings: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Register the deployments of ``path`` (all, or those in ``names``), with the
    parameters of ``settings`` (``{deployment: {parameter: value}}``).

    Returns, per deployment name, ``"<flow>/<name> <id>"`` (plus why its schedule is
    paused, if it is) or ``"skipped: <reason>"``.
    """
    specs = apply_settings(load_specs(path), settings or {})
    unknown = sorted(set(names or ()) - {s.name for s in specs})
    if unknown:
        raise DraftsError(f"{path}: no deployment(s) named {', '.join(unknown)}")
    results: dict[str, str] = {}
    for spec in specs:
        if names and spec.name not in names:
            continue
        try:
            deployment = build_deployment(spec)
        except ImportError as err:  # e.g. a flow that is not part of this installation
            results[spec.name] = f"skipped: cannot import {spec.entrypoint} ({err})"
            continue
        if spec.work_pool.get("name"):
            ensure_work_pool(spec.work_pool["name"], spec.work_pool.get("type", "process"))
        deployment_id = deployment.apply()
        paused = paused_reason(spec)
        results[spec.name] = f"{deployment.flow_name}/{spec.name} {deployment_id}" + (
            f"; {paused}" if paused else ""
        )
    return results


#: Flow parameters that name files or directories (made absolute before a run is created).
PATH_PARAMETERS = ("path", "out_dir", "incoming", "files")


def absolute_paths(parameters: dict[str, Any], cwd: str | os.PathLike[str] | None = None) -> dict:
    """``parameters`` with every path parameter (:data:`PATH_PARAMETERS`) made absolute
    against ``cwd`` (default: the current directory). A worker runs flows in a temporary
    directory of its own, where a relative path would silently lose the outputs."""
    base = Path(cwd) if cwd else Path.cwd()
    out = dict(parameters)
    for key in PATH_PARAMETERS:
        value = out.get(key)
        if isinstance(value, str):
            out[key] = str((base / value).resolve())
        elif isinstance(value, list):
            out[key] = [str((base / v).resolve()) if isinstance(v, str) else v for v in value]
    return out


def check_run_paths(**paths: str | list[str]) -> None:
    """Refuse relative paths in a flow run started from a deployment (its worker's working
    directory is a temporary one, deleted after the run): one clear error naming them."""
    from prefect.context import get_run_context

    run = getattr(get_run_context(), "flow_run", None)
    if run is None or run.deployment_id is None:
        return
    relative = [f"{name}={value!r}" for name, values in paths.items()
                for value in ([values] if isinstance(values, str) else values)
                if not Path(value).is_absolute()]  # fmt: skip
    if relative:
        raise DraftsError(
            f"relative path(s) in a deployment run: {', '.join(relative)}; the worker runs in "
            "a temporary directory, so give absolute paths (drafts trigger makes them so)"
        )


def trigger(deployment: str, parameters: dict[str, Any]) -> str:
    """Start a run of ``deployment`` (``flow-name/deployment-name``); returns the run id.

    Does not wait: the run is scheduled on the API and a worker of its pool executes it.
    """
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    with api_errors(deployment):
        with get_client(sync_client=True) as client:
            schema = client.read_deployment_by_name(deployment).parameter_openapi_schema or {}
        known = set(schema.get("properties") or {})
        unknown = sorted(set(parameters) - known) if known else []
        if unknown:
            raise DraftsError(
                f"{deployment}: unknown parameter(s) {', '.join(unknown)} (it takes "
                f"{', '.join(sorted(known))})"
            )
        flow_run = run_deployment(deployment, parameters=absolute_paths(parameters), timeout=0)
    return str(flow_run.id)


def wait_for(flow_run_id: str, *, poll_s: float = 2.0, timeout_s: float | None = None) -> Any:
    """Follow a flow run until it ends (or ``timeout_s`` passes); returns its last state."""
    import time

    from prefect.client.orchestration import get_client

    start = time.monotonic()
    with api_errors(flow_run_id), get_client(sync_client=True) as client:
        while True:
            state = client.read_flow_run(flow_run_id).state
            if state is not None and state.is_final():
                return state
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                return state
            time.sleep(poll_s)


@contextlib.contextmanager
def api_errors(what: str):
    """Turn the Prefect API's errors about ``what`` into one clear :class:`DraftsError`:
    an unknown deployment, a parameter the flow does not take, an unreachable server."""
    import httpx
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError

    try:
        yield
    except ObjectNotFound:
        raise DraftsError(
            f"{what}: no such deployment or run on the API (deployments are named "
            "FLOW/DEPLOYMENT, e.g. drafts-search/search; `prefect deployment ls` lists them)"
        ) from None
    except PrefectHTTPStatusError as err:
        detail = err.response.text.strip().replace("\n", " ")[:300]
        raise DraftsError(f"{what}: the API refused it ({err.response.status_code}): "
                          f"{detail}") from None  # fmt: skip
    except (httpx.ConnectError, httpx.ConnectTimeout, ConnectionError, OSError) as err:
        from prefect.settings import PREFECT_API_URL

        raise DraftsError(
            f"cannot reach the Prefect API at {PREFECT_API_URL.value() or '(embedded)'}: "
            f"{err}; set PREFECT_API_URL to a running server"
        ) from None
