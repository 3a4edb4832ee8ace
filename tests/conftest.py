"""Shared fixtures: seeded randomness, paths to the real test data."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

# The searches' marker of compiled kernels (drafts_ops.core.hardware.kernel_cache_marker) goes
# to a directory of this test session, not the user's ~/.cache.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="drafts-ops-test-cache-")
# Flow commands run against the session's harness or Prefect's temporary server, never a
# lasting local API under the user's home (tests of that API set DRAFTS_HOME and DRAFTS_API).
os.environ["DRAFTS_API"] = "temporary"
os.environ["DRAFTS_HOME"] = tempfile.mkdtemp(prefix="drafts-ops-test-home-")

#: The real observations (28.fil, small.fits, test.h5 of the `your` project's test data,
#: GPL-3.0, so not in this repository): DRAFTS_REAL_DATA, else ../shared/data/real beside the
#: checkout (CI lays shared/ beside the clone too). README "Install and run" says how.
REAL_DATA = Path(os.environ.get("DRAFTS_REAL_DATA")
                 or Path(__file__).resolve().parents[2] / "shared" / "data" / "real")  # fmt: skip


@pytest.fixture
def rng() -> np.random.Generator:
    """The one seeded random generator of the test suite."""
    return np.random.default_rng(20261129)


@pytest.fixture(scope="session")
def real_data() -> Path:
    """Directory of the real observations; tests using it skip when it is absent."""
    if not (REAL_DATA / "28.fil").exists():
        pytest.skip(
            f"real test data (28.fil, small.fits, test.h5 of the `your` project) not "
            f"found at {REAL_DATA}; set DRAFTS_REAL_DATA (README: Install and run)"
        )
    return REAL_DATA


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """One temporary Prefect API (``prefect_test_harness``, SQLite) for the whole session.

    ``PREFECT_HOME`` points into a temp dir, so no test touches ``~/.prefect``. Creating the
    API database runs ~120 migrations (tens of seconds on a loaded machine); a freshly
    migrated copy is kept in pytest's cache (keyed by the Prefect version) and given to the
    harness on later runs, which then starts in a few seconds.
    """
    import sqlite3

    import prefect
    import prefect.testing.utilities as harness_module
    from prefect.settings import PREFECT_HOME, temporary_settings

    home = tmp_path_factory.mktemp("prefect-home")
    db_dir = tmp_path_factory.mktemp("prefect-db")
    db_file = db_dir / "prefect-test.db"  # the name prefect_test_harness uses
    cache = getattr(request.config, "cache", None)
    template = (
        Path(cache.mkdir("prefect-db")) / f"prefect-{prefect.__version__}.db" if cache else None
    )
    if template is not None and template.exists():
        shutil.copyfile(template, db_file)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PREFECT_HOME", str(home))
        mp.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
        mp.setattr(harness_module, "mkdtemp", lambda: str(db_dir))
        with (
            temporary_settings(updates={PREFECT_HOME: home}),
            harness_module.prefect_test_harness(server_startup_timeout=240),
        ):
            if template is not None and not template.exists():
                with sqlite3.connect(db_file) as src, sqlite3.connect(template) as dst:
                    src.backup(dst)
            yield
