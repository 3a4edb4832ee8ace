"""The kernel launch layer: CPU grid mapping, CUDA simulator equivalence, platform facts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest

from drafts_ops.core.errors import OperatorError
from drafts_ops.core.hardware import platform_info, simd_level
from drafts_ops.dedisp.launch import Kernel, as_kernel, launch

ROOT = Path(__file__).resolve().parents[1]


def index_body(block, thread, block_dim, out):
    x = block[0] * block_dim[0] + thread[0]
    y = block[1] * block_dim[1] + thread[1]
    if y < out.shape[0] and x < out.shape[1]:
        out[y, x] = 100 * y + x


@numba.njit
def add_body(block, thread, block_dim, a, b, scale, out):  # noqa: PLR0917
    i = block[0] * block_dim[0] + thread[0]
    if i < out.size:
        out[i] = scale * a[i] + b[i]


def _expected_codes(shape):
    y, x = np.indices(shape)
    return 100 * y + x


def test_cpu_launch_covers_2d_grid_exactly_once():
    out = np.full((5, 7), -1, np.int64)
    launch(Kernel(index_body, outputs=("out",)), (3, 2), (3, 4), out)
    np.testing.assert_array_equal(out, _expected_codes((5, 7)))


def test_cpu_launch_1d_with_scalars(rng):
    a, b = rng.random(50), rng.random(50)
    out = np.zeros(50)
    launch(add_body, 7, 8, a, b, 2.5, out)
    np.testing.assert_allclose(out, 2.5 * a + b)


def test_kernel_wrapper_names_and_py_func():
    kern = as_kernel(add_body)
    assert kern.name == "add_body"
    assert kern.arg_names == ("a", "b", "scale", "out")
    assert kern.py_func is add_body.py_func
    assert kern.is_output("a")  # nothing declared: every array may be written
    assert not Kernel(index_body, outputs=("x",)).is_output("out")


@pytest.mark.parametrize(
    ("grid", "block", "args", "backend", "match"),
    [
        (0, 1, (np.zeros(3),), "cpu", "grid"),
        ((1, 2, 3), 1, (np.zeros(3),), "cpu", "grid"),
        (1, 1.5, (np.zeros(3),), "cpu", "block"),
        (1, 1, (), "cpu", "takes 1 arguments"),
        (1, 1, (np.zeros(3),), "tpu", "unknown backend"),
    ],
)
def test_bad_launches_raise(grid, block, args, backend, match):
    with pytest.raises(OperatorError, match=match):
        launch(index_body, grid, block, *args, backend=backend)


def test_debug_trace_prints_each_pick(capsys):
    out = np.zeros((2, 6), np.int64)
    launch(index_body, (2, 1), (3, 2), out, debug=True, debug_threads=[(1, (2, 1)), (0, 0)])
    text = capsys.readouterr().out
    assert "[index_body] block (1, 0) thread (2, 1)" in text
    assert "wrote 1 of out: out[1, 5]=105" in text
    assert "out[0, 0]=0" in text
    np.testing.assert_array_equal(out, _expected_codes((2, 6)))


def _gpu_present() -> bool:
    from drafts_ops.core.hardware import gpu_info

    info = gpu_info()
    return info is not None and not info["simulator"]


def test_cuda_backend_without_gpu_is_a_clear_error():
    if _gpu_present():
        pytest.skip("a CUDA GPU is present")
    with pytest.raises(OperatorError, match="no CUDA GPU"):
        launch(index_body, 1, 1, np.zeros((1, 1)), backend="cuda")


@pytest.mark.slow
def test_cuda_simulator_equals_cpu():
    """Numba's CUDA simulator (fresh process: the switch must precede numba.cuda)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "cudasim_check.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    np.testing.assert_allclose(result["sim"], result["cpu"], rtol=1e-6)
    np.testing.assert_allclose(result["sim_spt1"], result["cpu"], rtol=1e-6)
    np.testing.assert_array_equal(result["grid_cuda"], _expected_codes((5, 7)))
    np.testing.assert_array_equal(result["grid_cpu"], _expected_codes((5, 7)))
    assert result["gpu"]["simulator"] is True


@pytest.mark.gpu
def test_real_gpu_prototype_equals_cpu(rng):
    if not _gpu_present():
        pytest.skip("no CUDA GPU")
    from drafts_ops.dedisp.plan import DMPlan
    from drafts_ops.dedisp.prototype import dedisperse_prototype

    plan = DMPlan.build(np.linspace(0, 500, 64), 1500.0 - np.arange(256), 5e-4)
    data = rng.integers(0, 256, (256, plan.max_delay + 5000)).astype(np.float32)
    np.testing.assert_allclose(
        dedisperse_prototype(data, plan, backend="cuda"),
        dedisperse_prototype(data, plan, backend="cpu"),
        rtol=1e-5,
    )


def test_platform_info_reports_hardware():
    info = platform_info()
    assert info["cores"] >= 1 and info["numba_threads"] >= 1
    assert info["simd"] in {"avx512", "avx2", "avx", "sse4.2", "neon", "none"}
    assert info["numba_version"] == numba.__version__
    assert isinstance(info["threading_layer"], str)
    assert info["gpu"] is None or {"name", "sm_count"} <= set(info["gpu"])


def test_simd_level_prefers_widest():
    assert simd_level({"avx", "avx2", "avx512f"}) == "avx512"
    assert simd_level({"sse4.2", "avx", "avx2"}) == "avx2"
    assert simd_level(set()) == "none"
