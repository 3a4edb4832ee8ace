"""Run each dedispersion path over the same streamed observation, timed.

A *path* is the prototype (``"prototype"``, the baseline) or one production algorithm
(``"production/<algorithm>"``). Every path reads the file itself, block by block, with the
same overlap, so the comparison covers streaming too; its DM–time output goes to a
``.npy`` file and only small records travel between stages. A DM range that the search
averages is read averaged the same way (:class:`AveragedReader`).
"""

from __future__ import annotations

import dataclasses
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from drafts_ops.core.atomic import atomic_path
from drafts_ops.core.errors import OperatorError, ParameterError
from drafts_ops.dedisp import dedisperse
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.dedisp.prototype import dedisperse_prototype
from drafts_ops.detect.preprocess import decimate_block
from drafts_ops.io import open_observation
from drafts_ops.io.reader import ObservationReader
from drafts_ops.validation.config import DelayFault

BASELINE = "prototype"
_MIB = 1024.0 * 1024.0

#: ``run(block [nchan, nsamp]) -> dm_time [ndm, >= nsamp - overlap]``
Runner = Callable[[np.ndarray], np.ndarray]


def path_name(algorithm: str) -> str:
    """Name of the production path running ``algorithm``."""
    return f"production/{algorithm}"


def path_algorithm(name: str) -> str | None:
    """The production algorithm of path ``name`` (``None`` for the prototype)."""
    return None if name == BASELINE else name.split("/", 1)[1]


def production_algorithms(backend: str = "cpu") -> tuple[str, ...]:
    """Production algorithms registered and available for ``backend``."""
    try:
        from drafts_ops.dedisp.registry import operators
    except ImportError:
        raise OperatorError(
            "the production dedispersion operator (drafts_ops.dedisp.registry) is not "
            "installed: nothing to validate against the prototype"
        ) from None
    found = {
        s.algorithm
        for s in operators()
        if s.mode == "production" and s.backend == backend and s.available()
    }
    return tuple(sorted(found, key=lambda a: (a != "brute", a)))


def apply_fault(plan: DMPlan, fault: DelayFault) -> DMPlan:
    """A copy of ``plan`` whose delay ``[fault.dm_index, fault.channel]`` is off by ``shift``."""
    if not (0 <= fault.dm_index < plan.ndm and 0 <= fault.channel < plan.nchan):
        raise ParameterError(
            f"delay fault at DM index {fault.dm_index}, channel {fault.channel} is outside "
            f"the plan ({plan.ndm} trials x {plan.nchan} channels)"
        )
    delays = plan.delays.copy()
    delays[fault.dm_index, fault.channel] += fault.shift
    if delays[fault.dm_index, fault.channel] < 0:
        raise ParameterError(f"delay fault {fault} makes a delay negative")
    return DMPlan(plan.dms, plan.freqs, plan.tsamp, delays, plan.decimation)


def path_plan(plan: DMPlan, name: str, fault: DelayFault | None) -> DMPlan:
    """The plan path ``name`` is given (the faulted one for the faulted algorithm)."""
    if fault is not None and path_algorithm(name) == fault.algorithm:
        return apply_fault(plan, fault)
    return plan


def make_runner(name: str, plan: DMPlan, backend: str = "cpu") -> Runner:
    """The dedisperser of path ``name`` for ``plan`` (already faulted if wanted)."""
    algorithm = path_algorithm(name)
    if algorithm is None:
        return lambda block: dedisperse_prototype(block, plan, backend=backend)

    return lambda block: dedisperse(
        block, plan, mode="production", algorithm=algorithm, backend=backend
    )


@dataclass(frozen=True)
class PathRun:
    """One path's streamed run: where its DM–time went and what it cost.

    Times in s: ``warmup_s`` (first call, JIT compilation; not counted), ``read_s``
    (reading blocks), ``dedisperse_s`` (kernel calls). ``peak_mib``: largest extra memory
    (numpy allocations, MiB) during the calls beyond the output array; ``nblocks`` blocks.
    ``read_s`` and ``dedisperse_s`` are of the fastest of the repeated passes.
    """

    name: str
    dmt_path: str
    nout: int
    ndm: int
    nchan: int
    nblocks: int
    warmup_s: float
    read_s: float
    dedisperse_s: float
    peak_mib: float

    @property
    def cells(self) -> int:
        """Channel x output sample x DM cells computed."""
        return self.nchan * self.nout * self.ndm

    def load(self) -> np.ndarray:
        """The DM–time output ``[ndm, nout]`` float32 (memory-mapped)."""
        return np.load(self.dmt_path, mmap_mode="r")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def overlap_for(plan: DMPlan, fault: DelayFault | None) -> int:
    """Block overlap every path uses: the largest maximum delay of any path's plan."""
    if fault is None:
        return plan.max_delay
    return max(plan.max_delay, apply_fault(plan, fault).max_delay)


def stream_path(
    file: str | Path,
    plan: DMPlan,
    name: str,
    out_path: str | Path,
    *,
    block_size: int,
    overlap: int,
    max_samples: int | None = None,
    backend: str = "cpu",
    fault: DelayFault | None = None,
    repeats: int = 1,
    factor: int = 1,
) -> PathRun:
    """Stream ``file`` through path ``name`` and save its DM–time array to ``out_path``.

    ``factor`` > 1: the file's samples averaged ``factor`` at a time (a DM range's
    resolution, :class:`AveragedReader`); ``max_samples`` counts the file's samples.

    Blocks hold ``block_size`` new samples plus ``overlap`` (``>= plan.max_delay``); each
    yields its first ``len - overlap`` output samples, so the output tiles the file once.
    With ``repeats > 1`` the stream runs that many times and the fastest pass is reported
    (steady state: shape-dependent caches warm).
    """
    run = make_runner(name, path_plan(plan, name, fault), backend)
    with open_observation(file) as opened:
        reader = AveragedReader(opened, factor) if factor > 1 else opened
        limit = reader.header.nsamples
        total = limit if max_samples is None else min(max_samples // factor, limit)
        nout = total - overlap
        if nout <= 0:
            raise ParameterError(
                f"{file}: {total} samples is not more than the maximum delay {overlap}; "
                "lower the maximum DM"
            )
        warm = reader.read_block(0, min(total, overlap + min(block_size, nout)), raw=True)
        t0 = time.perf_counter()
        run(warm)
        warmup = time.perf_counter() - t0
        out = np.empty((plan.ndm, nout), np.float32)
        passes = [_stream(reader, run, out, block_size=block_size, overlap=overlap, total=total)
                  for _ in range(max(int(repeats), 1))]  # fmt: skip
    read_s = min(p[0] for p in passes)
    dedisp_s = min(p[1] for p in passes)
    nblocks, peak = passes[0][2], max(p[3] for p in passes)
    with atomic_path(out_path) as tmp, tmp.open("wb") as fh:
        np.save(fh, out)
    return PathRun(name, str(out_path), nout, plan.ndm, plan.nchan, nblocks, warmup, read_s,
                   dedisp_s, peak)  # fmt: skip


def _stream(reader, run: Runner, out: np.ndarray, *, block_size: int, overlap: int, total: int):
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    read_s = dedisp_s = 0.0
    nblocks = 0
    try:
        blocks = reader.iter_blocks(block_size, overlap, raw=True, stop=total)
        while True:
            t0 = time.perf_counter()
            item = next(blocks, None)
            if item is None:
                break
            start, block = item
            t1 = time.perf_counter()
            dmt = run(block)
            dedisp_s += time.perf_counter() - t1
            read_s += t1 - t0
            n = block.shape[1] - overlap
            out[:, start : start + n] = dmt[:, :n]
            nblocks += 1
        peak = (tracemalloc.get_traced_memory()[1] - base) / _MIB
    finally:
        if started:
            tracemalloc.stop()
    return read_s, dedisp_s, nblocks, max(peak, 0.0)


def probe_data(plan: DMPlan, overlap: int, nout: int, seed: int = 2024) -> np.ndarray:
    """Seeded random uint8 data ``[nchan, overlap + nout]`` for the random-data probe.

    Integer samples keep every float32 sum exact (``nchan * 255 < 2**24``), so an exact
    algorithm must reproduce the prototype bit for bit whatever its summation order.
    """
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (plan.nchan, overlap + nout), dtype=np.uint8)


class AveragedReader(ObservationReader):
    """An opened observation read at ``factor`` times its sample time: float32 averages
    of ``factor`` samples (remainders dropped), as a DM range of the search averages
    them; the wrapped reader stays open and owned by its caller."""

    def __init__(self, reader: ObservationReader, factor: int) -> None:
        self.reader, self.factor = reader, int(factor)
        self.path = reader.path
        h = reader.header
        self.header = dataclasses.replace(h, tsamp=h.tsamp * self.factor, nbits=32,
                                          nsamples=h.nsamples // self.factor)  # fmt: skip

    def _read(self, start: int, nsamp: int, raw: bool) -> np.ndarray:
        f = self.factor
        block = self.reader.read_block(start * f, nsamp * f, raw=True)
        return decimate_block(block, f, 1)
