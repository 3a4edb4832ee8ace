"""Brute-force dedispersion on a CUDA GPU (numba-cuda).

One thread per output sample: grid ``x`` over time blocks, ``y`` over DM trials, ``z`` over
the batch; each thread sums its channels in order in float32, so it agrees with the CPU
kernels to float32 rounding (exactly for integer input). Neighbouring threads read
neighbouring samples of a channel row, so global loads coalesce. Tested under the CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1``, set before ``numba.cuda`` is first imported).
"""

from __future__ import annotations

import functools

import numpy as np

from drafts_ops.core.errors import OperatorError


@functools.cache
def cuda_available() -> bool:
    """True when numba-cuda finds a GPU (or the simulator is enabled)."""
    try:
        from numba import cuda
    except ImportError:  # pragma: no cover - numba-cuda is optional
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # pragma: no cover - driver problems mean "no GPU"
        return False


cuda = None  # numba.cuda, imported on first use (after NUMBA_ENABLE_CUDASIM is read)


def _brute_body(data, delays, out, d_first):  # pragma: no cover - device code
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    d = d_first + cuda.blockIdx.y
    b = cuda.blockIdx.z
    if t < out.shape[2] and d < out.shape[1]:
        acc = np.float32(0.0)
        for c in range(data.shape[1]):
            acc += np.float32(data[b, c, t + delays[d, c]])
        out[b, d, t] = acc


@functools.cache
def _kernel():
    global cuda  # noqa: PLW0603 - the simulator patches this module global
    from numba import cuda as numba_cuda

    cuda = numba_cuda
    return numba_cuda.jit(_brute_body)


def gpu_facts() -> dict[str, int | str]:
    """Name and launch limits of the current GPU (empty without one)."""
    if not cuda_available():
        return {}
    from numba import cuda

    dev = cuda.get_current_device()
    return {
        "gpu_name": str(getattr(dev, "name", "simulator")),
        "gpu_max_threads_per_block": int(getattr(dev, "MAX_THREADS_PER_BLOCK", 1024)),
        "gpu_max_grid_y": int(getattr(dev, "MAX_GRID_DIM_Y", 65535)),
        "gpu_max_grid_z": int(getattr(dev, "MAX_GRID_DIM_Z", 65535)),
    }


def brute_cuda(data: np.ndarray, delays: np.ndarray, out: np.ndarray, tiling) -> None:
    """Dedisperse ``data [nbatch, nchan, nsamp]`` into ``out`` on the GPU.

    ``tiling`` is a CUDA :class:`~drafts_ops.dedisp.tiling.TilingPlan`: its grid ``y``
    covers ``tile_dm`` trials per launch.
    """
    if not cuda_available():
        raise OperatorError("the cuda backend needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1)")
    from numba import cuda

    kernel = _kernel()
    d_data = cuda.to_device(np.ascontiguousarray(data))
    d_delays = cuda.to_device(np.ascontiguousarray(delays, dtype=np.int32))
    d_out = cuda.device_array(out.shape, dtype=np.float32)
    gx, gy, gz = tiling.grid
    for d_first in range(0, out.shape[1], gy):
        kernel[(gx, gy, gz), tiling.threads](d_data, d_delays, d_out, d_first)
    d_out.copy_to_host(out)
