"""CUDA backend of the production operator: simulator at tiny sizes, real GPU when present."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from drafts_ops.dedisp import DMPlan, dedisperse, dedisperse_batch
    from drafts_ops.dedisp.reference import dedisperse_reference

    rng = np.random.default_rng(7)
    freqs = 1500.0 - np.arange(6) * 50.0
    plan = DMPlan.build(np.array([0.0, 40.0, 90.0]), freqs, 1e-3)
    for dtype in (np.uint8, np.float32):
        data = rng.integers(0, 50, (2, 6, plan.max_delay + 9)).astype(dtype)
        out = dedisperse_batch(data, plan, backend="cuda")
        for b in range(2):
            ref = dedisperse_reference(data[b], plan.delays)
            np.testing.assert_allclose(out[b], ref, rtol=1e-6)
    print("cudasim-ok")
    """
)


def test_cuda_backend_in_the_simulator():
    pytest.importorskip("numba.cuda")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "cudasim-ok" in result.stdout


def _has_gpu() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="no CUDA GPU")
def test_cuda_backend_equals_cpu_on_a_gpu(rng):
    from drafts_ops.dedisp import DMPlan, dedisperse

    freqs = 1500.0 - np.arange(256) * (500.0 / 256)
    plan = DMPlan.build(np.arange(0.0, 500.0), freqs, 393.216e-6)
    data = rng.integers(0, 256, (256, plan.max_delay + 4096)).astype(np.uint8)
    np.testing.assert_array_equal(
        dedisperse(data, plan, backend="cuda"), dedisperse(data, plan, backend="cpu")
    )
