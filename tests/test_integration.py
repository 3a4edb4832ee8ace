"""The deployments end to end (deploy/integration.sh): PostgreSQL, a Prefect server, a
process worker, triggered search / survey / validate runs, and Dask. Skipped where
PostgreSQL is not installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "deploy" / "integration.sh"


@pytest.mark.integration
@pytest.mark.slow
def test_deployments_end_to_end(tmp_path):
    if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql): "
                    "deploy/integration.sh needs it")  # fmt: skip
    bin_dir = str(Path(sys.executable).parent)  # drafts, prefect, dask of this environment
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(tmp_path)}
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "work")], env=env,
                          capture_output=True, text=True, timeout=1200, check=False)  # fmt: skip
    steps = [line for line in done.stdout.splitlines() if line.startswith("== integration")]
    assert done.returncode == 0, "\n".join(steps + done.stderr.splitlines()[-15:])
    assert steps[-1].startswith("== integration: all steps passed")
