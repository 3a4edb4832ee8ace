"""Prefect flows of drafts-ops: thin orchestration over the science code in ``drafts_ops``.

``flows.search`` (one observation), ``flows.survey`` (a directory, resumable), deployment
registration (``flows.deploy``), task runners (``flows.runners``) and the command-line
sub-commands (``flows.commands``). Deployment and cluster settings are data in ``deploy/``.
"""

from pathlib import Path

#: The checkout's deploy/ folder (prefect.yaml, dask.yaml, docker-compose.yml).
DEPLOY_DIR = Path(__file__).resolve().parents[1] / "deploy"
