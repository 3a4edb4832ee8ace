"""Shared fixtures: seeded randomness, paths to the real test data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

#: ../shared/data/real beside the checkout (CI lays shared/ beside the clone too).
REAL_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "real"


@pytest.fixture
def rng() -> np.random.Generator:
    """The one seeded random generator of the test suite."""
    return np.random.default_rng(20261129)


@pytest.fixture(scope="session")
def real_data() -> Path:
    """Directory of the real observations; tests using it skip when it is absent."""
    if not (REAL_DATA / "28.fil").exists():
        pytest.skip(f"real test data not found at {REAL_DATA}")
    return REAL_DATA
