"""Prefect flows of drafts-ops: thin orchestration over the science code in ``drafts_ops``.

``flows.search`` (one observation), ``flows.survey`` (a directory, resumable), deployment
registration (``flows.deploy``), task runners (``flows.runners``) and the command-line
sub-commands (``flows.commands``). Deployment and cluster settings are data in ``deploy/``.
"""

from pathlib import Path

from drafts_ops.core.errors import DraftsError
from drafts_ops.core.resources import resource_dir


def _deploy_dir() -> Path:
    try:
        return resource_dir("deploy")
    except DraftsError:  # nothing shipped: name the checkout's folder in later errors
        return Path(__file__).resolve().parents[1] / "deploy"


#: The deploy/ folder (prefect.yaml, dask.yaml, docker-compose.yml) of the checkout or of
#: the installed package (drafts_ops.core.resources).
DEPLOY_DIR = _deploy_dir()
