"""The one dedispersion entry point: :func:`dedisperse`, batches and streams.

``dedisperse(data, plan, mode=..., algorithm=..., backend=...)`` checks the input against
the registered operator's contract (shape, dtype), adapts the input without a float copy
(uint8 / uint16 / float32 go straight to the kernels), computes a tiling plan, takes scratch
from the workspace pool and runs the kernel. Production mode honours the plan's
time-decimation factors (see :func:`run_production`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from drafts_ops.core.errors import OperatorError
from drafts_ops.dedisp import registry
from drafts_ops.dedisp.brute import brute_cpu
from drafts_ops.dedisp.decimate import decimate_time, upsample_rows
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.dedisp.registry import Algorithm, Backend, Mode, OperatorSpec
from drafts_ops.dedisp.subband import BandPooling
from drafts_ops.dedisp.tiling import TilingPlan, plan_cpu_tiling, plan_cuda_tiling
from drafts_ops.dedisp.workspace import WorkspacePool, default_pool

log = logging.getLogger(__name__)


class Trials(NamedTuple):
    """A set of DM trials to run at one time resolution (all, or one decimation group)."""

    delays: np.ndarray  # [ndm, nchan] int32, in samples of this resolution
    dms: np.ndarray
    freqs: np.ndarray
    tsamp: float
    owner: DMPlan  # for caches tied to the plan's lifetime
    factor: int


@dataclass
class Context:
    """Per-call options handed to operator run functions."""

    pool: WorkspacePool = field(default_factory=lambda: default_pool)
    tiles: dict[str, int] = field(default_factory=dict)
    last_tiling: TilingPlan | None = None
    #: Input samples stand for ``(data - offset) * scale`` (see :func:`dedisperse`).
    offset: float = 0.0
    scale: float = 1.0
    #: Set by a kernel that applied ``offset`` and ``scale`` itself.
    affine_applied: bool = False
    #: Bands' pooled partial sums the sub-band kernel fills on the way (see :func:`dedisperse`).
    pooling: BandPooling | None = None


_LOGGED: set[tuple] = set()


def _log_tiling(tiling: TilingPlan) -> None:
    key = (tiling.operator, tiling.dtype, tiling.nbatch, tiling.nchan, tiling.nsamp, tiling.ndm)
    level = logging.DEBUG if key in _LOGGED else logging.INFO
    _LOGGED.add(key)
    log.log(level, "%s", tiling)


def _cpu_tiling(
    name: str, data, trials: Trials, out, ctx: Context, *, workspace: int = 0, log: bool = True
):
    tiling = plan_cpu_tiling(
        name,
        data.shape,
        ndm=trials.delays.shape[0],
        max_delay=data.shape[2] - out.shape[2],
        itemsize=data.dtype.itemsize,
        dtype=data.dtype.name,
        workspace_bytes=workspace,
        **ctx.tiles,
    )
    if log:
        ctx.last_tiling = tiling
        _log_tiling(tiling)
    return tiling


def _brute_cpu(data, trials: Trials, out, ctx: Context) -> None:
    brute_cpu(data, trials.delays, out, _cpu_tiling("production/brute/cpu", data, trials, out, ctx))


#: Scratch budget of the sub-band path per call, bytes (sets its time-chunk length; 256 MiB
#: ran the 1024-channel FAST-like plan 1.3x faster than 96 MiB: fewer, longer passes).
SUBBAND_SCRATCH_BYTES = 256 * 1024**2
#: Output samples per block for which the sub-band plan is chosen (the choice is kept for
#: every block length, so that one search builds one plan).
SUBBAND_PLAN_NOUT = 65536


def _subband_cpu(data, trials: Trials, out, ctx: Context) -> None:
    # lazy: numba-cuda and the other algorithms load only when used
    from drafts_ops.dedisp.subband import (
        auto_subband_plan,
        cached_subband_plan,
        chunk_length,
        content_key,
        integer_stage1,
        subband_cpu,
    )

    nout = out.shape[2]
    key = content_key(trials.delays, trials.dms, trials.freqs, extra=("auto", trials.tsamp))
    sub = cached_subband_plan(
        key,
        lambda: auto_subband_plan(
            trials.delays, trials.dms, trials.freqs, trials.tsamp, SUBBAND_PLAN_NOUT
        ),
    )
    scratch = np.dtype(np.uint16 if integer_stage1(sub, data.dtype) else np.float32)
    # Longer time tiles suit the two streaming stages (measured on the FAST-like bench).
    tiled = Context(ctx.pool, {"tile_dm": 16, "tile_t": min(4096, nout), **ctx.tiles})
    probe = _cpu_tiling("production/subband/cpu", data, trials, out, tiled, log=False)
    budget = SUBBAND_SCRATCH_BYTES // data.shape[0]
    chunk = chunk_length(sub, nout, probe.tile_t, budget, scratch.itemsize)
    shape = (data.shape[0], sub.buffer_len(chunk))
    tiling = _cpu_tiling("production/subband/cpu", data, trials, out, tiled,
                         workspace=scratch.itemsize * shape[0] * shape[1])  # fmt: skip
    ctx.last_tiling = tiled.last_tiling
    # One flat scratch of the budget's size, shared by every plan a thread runs (the
    # channel ranges of a sub-band search run one after another): not one per plan.
    floats = -(-shape[0] * shape[1] * scratch.itemsize // 4)  # the pool's buffer is float32
    size = max(floats, SUBBAND_SCRATCH_BYTES // 4)
    flat = ctx.pool.get("subband-stage1", (size,), np.float32).view(scratch)
    y = flat[: shape[0] * shape[1]].reshape(shape)
    nchan = data.shape[1]
    subband_cpu(data, trials.delays, out, tiling, sub=sub, y=y, chunk=chunk,
                offset=nchan * ctx.offset, scale=ctx.scale, pooling=ctx.pooling)  # fmt: skip
    ctx.affine_applied = True


def _brute_cuda(data, trials: Trials, out, ctx: Context) -> None:
    # lazy: numba-cuda and the other algorithms load only when used
    from drafts_ops.dedisp.cuda import brute_cuda, gpu_facts
    from drafts_ops.dedisp.tiling import MachineFacts, machine_facts

    base = machine_facts()
    facts = MachineFacts(base.threads, base.l1d_bytes, base.l2_bytes, base.l3_bytes, **gpu_facts())
    tiling = plan_cuda_tiling(
        "production/brute/cuda",
        data.shape,
        ndm=trials.delays.shape[0],
        max_delay=data.shape[2] - out.shape[2],
        dtype=data.dtype.name,
        facts=facts,
    )
    ctx.last_tiling = tiling
    _log_tiling(tiling)
    brute_cuda(data, trials.delays, out, tiling)


def _decimation_groups(plan: DMPlan) -> list[tuple[int, np.ndarray]]:
    factors = np.asarray(plan.decimation, dtype=np.int64)
    return [(int(f), np.flatnonzero(factors == f)) for f in np.unique(factors)]


def _trials_for(plan: DMPlan, factor: int, index: np.ndarray) -> Trials:
    if factor == 1 and index.size == plan.ndm:
        return Trials(plan.delays, plan.dms, plan.freqs, plan.tsamp, plan, 1)
    delays = np.ascontiguousarray(plan.delays[index] // factor, dtype=np.int32)
    return Trials(delays, plan.dms[index], plan.freqs, plan.tsamp * factor, plan, factor)


def _coarser(level, level_factor: int, factor: int, *, nsamp: int, ctx: Context, plan: DMPlan):
    """``level`` (averaged over ``level_factor`` samples) averaged over ``factor`` samples."""
    ratio = factor // level_factor
    if factor % level_factor:
        raise OperatorError(f"decimation factors {level_factor} and {factor} do not nest")
    shape = (level.shape[0], level.shape[1], -(-nsamp // factor))
    coarse = ctx.pool.get("decimated", shape, np.float32, id(plan))
    decimate_time(level, ratio, level_factor, nsamp, coarse)
    return coarse


def run_production(kernel):
    """Wrap a full-resolution kernel so that it honours ``plan.decimation``.

    Trials with factor ``f > 1`` are dedispersed from the input averaged over ``f``
    samples (delays ``floor(delay / f)``) and their rows are upsampled by repetition, so
    the output keeps the shape ``[nbatch, ndm, nout]``: ``out[d, t]`` holds the mean over
    the ``f``-sample window containing ``t`` (windows start at multiples of ``f`` from the
    block start). When ``nsamp`` is not a multiple of ``f`` the last coarse input sample
    averages the samples that exist, which touches only the last few outputs of a block.
    The input is decimated once per factor, each level from the previous one (2 from the
    input, 4 from 2, ...); a group's kernel sees only its coarse delays ``floor(delay /
    f)``, so its work shrinks by ``f`` in time and in maximum delay.
    """

    def run(data: np.ndarray, plan: DMPlan, out: np.ndarray, ctx: Context) -> None:
        groups = _decimation_groups(plan)
        if len(groups) == 1 and groups[0][0] == 1:
            kernel(data, _trials_for(plan, 1, groups[0][1]), out, ctx)
            return
        ctx.pooling = None  # pooled over the whole plan's trials: not per group
        nbatch, nsamp = data.shape[0], data.shape[2]
        nout = out.shape[2]
        level, level_factor = data, 1
        for factor, index in groups:  # increasing factors: each level decimates the last
            if factor > 1:
                level = _coarser(level, level_factor, factor, nsamp=nsamp, ctx=ctx, plan=plan)
                level_factor = factor
            trials = _trials_for(plan, factor, index)
            lo, hi = int(index[0]), int(index[-1]) + 1
            if factor == 1 and nbatch == 1 and hi - lo == index.size:
                kernel(level, trials, out[:, lo:hi], ctx)  # contiguous rows: write in place
                continue
            shape = (nbatch, index.size, -(-nout // factor))
            rows = ctx.pool.get("group-out", shape, np.float32)  # used before the next
            kernel(level, trials, rows, ctx)
            upsample_rows(rows, index, factor, out)

    return run


def _prototype_available() -> bool:
    # lazy: numba-cuda and the other algorithms load only when used
    import importlib.util

    return importlib.util.find_spec("drafts_ops.dedisp.prototype") is not None


def _prototype_runner(backend: str):
    def run(data: np.ndarray, plan: DMPlan, out: np.ndarray, ctx: Context) -> None:
        # lazy: numba-cuda and the other algorithms load only when used
        from drafts_ops.dedisp.prototype import dedisperse_prototype

        for b in range(data.shape[0]):
            out[b] = dedisperse_prototype(data[b], plan.delays, backend=backend)

    return run


def _register_builtin() -> None:
    # lazy: numba-cuda and the other algorithms load only when used
    from drafts_ops.dedisp.cuda import cuda_available

    specs = [
        OperatorSpec(
            "production", "brute", "cpu", run_production(_brute_cpu),
            "tiled brute force, Numba prange over (batch, DM, time) tiles, per-dtype kernels",
        ),
        OperatorSpec(
            "production", "subband", "cpu", run_production(_subband_cpu),
            "two-stage sub-band dedispersion, nominal DMs per sub-band by a delay-error rule",
        ),
        OperatorSpec(
            "production", "brute", "cuda", run_production(_brute_cuda),
            "brute force on a CUDA GPU via numba-cuda, one thread per output sample",
            available=cuda_available,
        ),
        OperatorSpec(
            "prototype", "brute", "cpu", _prototype_runner("cpu"),
            "the direct-launched prototype kernel (drafts_ops.dedisp.prototype), no tiling",
            available=_prototype_available,
        ),
        OperatorSpec(
            "prototype", "brute", "cuda", _prototype_runner("cuda"),
            "the prototype kernel launched on a CUDA grid",
            available=lambda: _prototype_available() and cuda_available(),
        ),
    ]  # fmt: skip
    for spec in specs:
        registry.register(spec, replace=True)


_register_builtin()


def _prepare(data: np.ndarray, plan: DMPlan, spec: OperatorSpec, out: np.ndarray | None):
    data = np.asarray(data)
    out_dtype = spec.infer_dtype(data.dtype)
    out_shape = spec.infer_shape(data.shape, plan)
    data3 = np.ascontiguousarray(data if data.ndim == 3 else data[None])
    if data3.dtype.byteorder not in ("=", "|"):
        data3 = data3.astype(data3.dtype.newbyteorder("="))
    shape3 = (data3.shape[0], *out_shape[-2:])
    if out is None:
        out3 = np.empty(shape3, dtype=out_dtype)
    else:
        if out.shape != out_shape or out.dtype != out_dtype or not out.flags.c_contiguous:
            raise OperatorError(
                f"out has shape {out.shape} {out.dtype}; need C-contiguous {out_shape} {out_dtype}"
            )
        out3 = out.reshape(shape3)
    return data3, out3


def dedisperse(
    data: np.ndarray,
    plan: DMPlan,
    *,
    mode: Mode = "production",
    algorithm: Algorithm = "brute",
    backend: Backend = "cpu",
    out: np.ndarray | None = None,
    pool: WorkspacePool | None = None,
    tiles: dict[str, int] | None = None,
    offset: float = 0.0,
    scale: float = 1.0,
    pooling: BandPooling | None = None,
) -> np.ndarray:
    """Dedisperse a block (or a batch of blocks) with a registered operator.

    Parameters
    ----------
    data : ndarray [nchan, nsamp] or [nbatch, nchan, nsamp]
        uint8, uint16 or float32 samples, channels in the order of ``plan.freqs``.
    plan : DMPlan
        DM trials and delays (samples).
    mode, algorithm, backend
        Which operator: ``prototype`` (the direct-launched kernel) or ``production``;
        ``brute`` or ``subband``; ``cpu`` or ``cuda``.
    out : ndarray, optional
        Destination of the output shape, float32 C-contiguous (no allocation).
    pool : WorkspacePool, optional
        Scratch pool (default: the shared pool).
    tiles : dict, optional
        Tile-size overrides ``tile_dm``, ``tile_t``, ``tile_chan`` (CPU production).
    offset, scale : float
        The samples stand for ``(data - offset) * scale`` (quantised data, e.g. normalised
        samples stored as uint8): the output is ``(sum - nchan * offset) * scale``. The
        sub-band kernel applies it as it writes; other operators in one more pass.
    pooling : BandPooling, optional
        Bands of channels whose partial sums the production sub-band operator max-pools
        over groups of trials as it dedisperses (``pooling.filled`` says whether it did:
        one block, no per-trial decimation, band edges on its stage-1 sub-band edges).

    Returns
    -------
    ndarray float32 [ndm, nsamp - plan.max_delay] (or [nbatch, ndm, ...])
    """
    spec = registry.get_operator(mode, algorithm, backend)
    data3, out3 = _prepare(data, plan, spec, out)
    ctx = Context(pool=default_pool if pool is None else pool, tiles=dict(tiles or {}),
                  offset=float(offset), scale=float(scale), pooling=pooling)  # fmt: skip
    spec.run(data3, plan, out3, ctx)
    if (offset != 0.0 or scale != 1.0) and not ctx.affine_applied:
        out3 -= np.float32(data3.shape[1] * offset)
        out3 *= np.float32(scale)
    return out3 if np.ndim(data) == 3 else out3[0]


def tiling_for(
    shape: tuple[int, ...],
    dtype,
    plan: DMPlan,
    *,
    algorithm: Algorithm = "brute",
    tiles: dict[str, int] | None = None,
) -> TilingPlan:
    """The CPU tiling plan production mode uses for input ``shape`` (for logs and docs)."""
    out_shape = registry.infer_shape(shape, plan)
    dtype = np.dtype(dtype)
    registry.infer_dtype(dtype)
    shape3 = (1, *shape) if len(shape) == 2 else tuple(shape)
    return plan_cpu_tiling(
        f"production/{algorithm}/cpu",
        shape3,
        ndm=plan.ndm,
        max_delay=shape3[2] - out_shape[-1],
        itemsize=dtype.itemsize,
        dtype=dtype.name,
        **(tiles or {}),
    )


def dedisperse_batch(
    blocks: np.ndarray | Sequence[np.ndarray], plan: DMPlan, **options
) -> np.ndarray:
    """Dedisperse ``blocks [nbatch, nchan, nsamp]`` (or equal-shaped 2-D blocks) in one call.

    Returns ``[nbatch, ndm, nsamp - plan.max_delay]`` float32; options as :func:`dedisperse`.
    """
    if isinstance(blocks, np.ndarray):
        batch = blocks
    else:
        shapes = {np.shape(b) for b in blocks}
        if len(shapes) != 1:
            raise OperatorError(f"a batch needs blocks of one shape, got {sorted(shapes)}")
        batch = np.stack(blocks)
    if batch.ndim != 3:
        raise OperatorError(f"a batch has shape [nbatch, nchan, nsamp], got {batch.shape}")
    return dedisperse(batch, plan, **options)


def default_block_nsamp(plan: DMPlan) -> int:
    """Output samples per streamed block: 16384 or twice the maximum delay, whichever is
    larger, rounded up to a multiple of the largest decimation factor."""
    factor = int(plan.decimation.max())
    n = max(16384, 2 * plan.max_delay)
    return -(-n // factor) * factor


def stream_dedisperse(
    reader,
    plan: DMPlan,
    *,
    batch_blocks: int = 2,
    block_nsamp: int | None = None,
    pool: WorkspacePool | None = None,
    **options,
) -> Iterator[tuple[int, np.ndarray]]:
    """Dedisperse an observation block by block, ``batch_blocks`` blocks per kernel call.

    Blocks overlap by ``plan.max_delay`` samples, so block ``k`` yields exactly
    ``block_nsamp`` outputs starting at sample ``start_k = k * block_nsamp`` and the
    outputs tile the file once (the last block may be shorter). Yields
    ``(start_sample, dm_time [ndm, n])``; peak memory is about ``batch_blocks`` input
    blocks in their raw dtype plus two output batches.
    """
    if batch_blocks < 1:
        raise OperatorError(f"batch_blocks = {batch_blocks} must be >= 1")
    if reader.header.nchans != plan.nchan:
        raise OperatorError(
            f"{reader.path}: {reader.header.nchans} channels, DM plan has {plan.nchan}"
        )
    block_nsamp = block_nsamp or default_block_nsamp(plan)
    if block_nsamp <= 0:
        raise OperatorError(f"block_nsamp = {block_nsamp} must be positive")
    factor = int(plan.decimation.max())
    block_nsamp = -(-block_nsamp // factor) * factor  # decimation windows align across blocks
    pool = default_pool if pool is None else pool
    overlap = plan.max_delay
    full = block_nsamp + overlap
    batch: np.ndarray | None = None
    starts: list[int] = []

    def flush() -> Iterator[tuple[int, np.ndarray]]:
        result = dedisperse(batch[: len(starts)], plan, pool=pool, **options)
        reader.release(starts[-1] + block_nsamp)  # earlier samples are never read again
        batch_starts = list(starts)
        starts.clear()
        for i, start in enumerate(batch_starts):
            yield start, result[i]

    for start, block in reader.iter_blocks(block_nsamp, overlap, raw=True):
        if block.shape[1] <= overlap:
            raise OperatorError(
                f"{reader.path}: {block.shape[1]} samples, not more than the maximum delay "
                f"{overlap} of the DM plan"
            )
        if block.shape[1] == full:
            if batch is None or batch.dtype != block.dtype:
                batch = pool.get("stream-batch", (batch_blocks, plan.nchan, full), block.dtype)
            batch[len(starts)] = block
            starts.append(start)
            if len(starts) == batch_blocks:
                yield from flush()
            continue
        if starts:
            yield from flush()
        yield start, dedisperse(block, plan, pool=pool, **options)
    if starts:
        yield from flush()
