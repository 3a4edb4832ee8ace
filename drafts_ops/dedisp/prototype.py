"""The prototype dedisperser: one kernel, launched directly on a fixed grid.

No tiling beyond the launch grid, fixed shapes, no operator framework: easy to debug
(``debug=True`` prints chosen threads, ``dump_dir`` saves the tensors) and the baseline
that the production operator is measured against.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from drafts_ops.core.errors import OperatorError
from drafts_ops.dedisp.brute_kernels import dedisperse_thread
from drafts_ops.dedisp.launch import Dim, Kernel, launch
from drafts_ops.dedisp.modes import Backend
from drafts_ops.dedisp.plan import DMPlan

#: The prototype kernel: writes ``out``.
DEDISPERSE_KERNEL = Kernel(dedisperse_thread, outputs=("out",))

#: Default (threads per block, samples per thread) per backend. On the CPU a thread's
#: contiguous span vectorises; on a GPU one sample per thread keeps loads coalesced.
DEFAULT_GEOMETRY: dict[str, tuple[int, int]] = {"cpu": (4, 512), "cuda": (128, 1)}

#: Input dtypes the kernel reads directly (others are converted to float32).
NATIVE_DTYPES = (np.dtype(np.float32), np.dtype(np.uint8), np.dtype(np.uint16))


def launch_geometry(
    ndm: int, nout: int, threads: int, samples_per_thread: int
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Grid ``(DMs, time chunks)`` and block ``(threads, 1)`` covering ``[ndm, nout]``."""
    chunk = threads * samples_per_thread
    return (ndm, max(-(-nout // chunk), 1)), (threads, 1)


def dedisperse_prototype(
    data: np.ndarray,
    delays: np.ndarray | DMPlan,
    *,
    backend: Backend = "cpu",
    block: Dim | None = None,
    samples_per_thread: int | None = None,
    debug: bool = False,
    debug_threads: tuple = ((0, 0),),
    dump_dir: str | Path | None = None,
) -> np.ndarray:
    """Dedisperse one block with the directly launched kernel.

    Parameters
    ----------
    data : ndarray [nchan, nsamp]
        float32, uint8 or uint16 filterbank (other real dtypes are converted to float32).
    delays : ndarray [ndm, nchan] int, or DMPlan
        Channel delays in samples, or a plan whose ``delays`` are used.
    backend : "cpu" or "cuda"
    block : int, optional
        Threads per block (default per backend, see :data:`DEFAULT_GEOMETRY`).
    samples_per_thread : int, optional
        Consecutive output samples computed by one thread.
    debug, debug_threads, dump_dir
        Debug aids of :func:`drafts_ops.dedisp.launch.launch`.

    Returns
    -------
    ndarray [ndm, nsamp - max delay] float32
        ``out[d, t] = sum_c data[c, t + delays[d, c]]``.
    """
    table = delays.delays if isinstance(delays, DMPlan) else np.asarray(delays)
    data = _check_inputs(data, table)
    table = np.ascontiguousarray(table, dtype=np.int32)
    nout = data.shape[1] - int(table.max())
    out = np.empty((table.shape[0], nout), dtype=np.float32)
    default_threads, default_spt = DEFAULT_GEOMETRY.get(backend, (1, 1))
    threads = default_threads if block is None else _threads(block)
    spt = default_spt if samples_per_thread is None else int(samples_per_thread)
    if spt < 1:
        raise OperatorError(f"samples_per_thread = {samples_per_thread} must be >= 1")
    grid, block2 = launch_geometry(table.shape[0], nout, threads, spt)
    launch(
        DEDISPERSE_KERNEL,
        grid,
        block2,
        data,
        table,
        out,
        spt,
        backend=backend,
        debug=debug,
        debug_threads=debug_threads,
        dump_dir=dump_dir,
    )
    return out


def _threads(block: Dim) -> int:
    dims = (block,) if isinstance(block, (int, np.integer)) else tuple(block)
    if len(dims) not in (1, 2) or (len(dims) == 2 and dims[1] != 1) or int(dims[0]) < 1:
        raise OperatorError(f"block {block!r} must be a positive thread count (1-D)")
    return int(dims[0])


def _check_inputs(data: np.ndarray, delays: np.ndarray) -> np.ndarray:
    data = np.asarray(data)
    if data.ndim != 2 or delays.ndim != 2 or delays.shape[1] != data.shape[0]:
        raise OperatorError(
            f"data {data.shape} and delays {delays.shape} do not match: "
            "need data [nchan, nsamp] and delays [ndm, nchan]"
        )
    if delays.size == 0 or delays.min() < 0:
        raise OperatorError("delays must be a non-empty table of non-negative samples")
    if data.shape[1] <= int(delays.max()):
        raise OperatorError(
            f"{data.shape[1]} samples is not more than the maximum delay {int(delays.max())}"
        )
    if data.dtype not in NATIVE_DTYPES:
        data = data.astype(np.float32)
    return np.ascontiguousarray(data)
