"""Tiling plans: how the production operator splits a dedispersion into parallel tiles.

The analogue of a tiling context in an accelerator operator framework: from the input
shape, the DM plan and facts about the machine (cache sizes, cores; block and grid limits on
a GPU) it fixes tile sizes over DM, time and channel, the input overlap every tile needs,
the number of tiles and the scratch (workspace) bytes. It is printable and logged at INFO
by :func:`drafts_ops.dedisp.operator.dedisperse`.

Tiles never change the result: every output sample is summed over channels in the same
order whatever the tile sizes (see :mod:`drafts_ops.dedisp.brute`).
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path

from drafts_ops.core.errors import OperatorError

_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")
_DEFAULT_CACHE = {"L1d": 32 * 1024, "L2": 512 * 1024, "L3": 8 * 1024 * 1024}
#: CUDA limits used when no device can be queried (every CUDA GPU since compute 3.0).
_CUDA_LIMITS = {"max_threads_per_block": 1024, "max_grid_y": 65535, "max_grid_z": 65535}


@dataclass(frozen=True)
class MachineFacts:
    """What the tiler knows about the hardware (bytes, counts)."""

    threads: int
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    gpu_name: str = ""
    gpu_max_threads_per_block: int = _CUDA_LIMITS["max_threads_per_block"]
    gpu_max_grid_y: int = _CUDA_LIMITS["max_grid_y"]
    gpu_max_grid_z: int = _CUDA_LIMITS["max_grid_z"]


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def read_cache_sizes(cache_dir: Path = _CACHE_DIR) -> dict[str, int]:
    """Data-cache sizes (bytes) keyed ``L1d``, ``L2``, ``L3`` from sysfs, else sysconf."""
    sizes = dict(_DEFAULT_CACHE)
    found: dict[str, int] = {}
    for index in sorted(cache_dir.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        found["L1d" if level == "1" else f"L{level}"] = size
    if not found:
        for key, name in (("L1d", "SC_LEVEL1_DCACHE_SIZE"), ("L2", "SC_LEVEL2_CACHE_SIZE")):
            try:
                value = os.sysconf(name)
            except (ValueError, OSError):
                continue
            if value > 0:
                found[key] = value
    sizes.update(found)
    return sizes


@functools.cache
def machine_facts() -> MachineFacts:
    """Facts about this machine (cached): Numba threads and data-cache sizes."""
    import numba

    sizes = read_cache_sizes()
    return MachineFacts(
        threads=int(numba.get_num_threads()),
        l1d_bytes=sizes["L1d"],
        l2_bytes=sizes["L2"],
        l3_bytes=sizes["L3"],
    )


@dataclass(frozen=True)
class TilingPlan:
    """How one operator call is split into tiles.

    Attributes
    ----------
    operator : str
        Registry name of the operator the plan is for.
    dtype : str
        Input dtype the kernels consume directly.
    nbatch, nchan, nsamp : int
        Input shape ``[nbatch, nchan, nsamp]``.
    ndm, nout : int
        Output shape ``[nbatch, ndm, nout]``.
    tile_dm, tile_t, tile_chan : int
        Tile sizes over DM trials, output samples and channels.
    overlap : int
        Extra input samples each time tile reads beyond its outputs (the maximum delay).
    workspace_bytes : int
        Scratch memory the call needs beside its input and output.
    threads : int
        CPU threads (or CUDA threads per block) running tiles concurrently.
    grid : tuple of int
        CUDA grid ``(x, y, z)``; empty on the CPU.
    """

    operator: str
    dtype: str
    nbatch: int
    nchan: int
    nsamp: int
    ndm: int
    nout: int
    tile_dm: int
    tile_t: int
    tile_chan: int
    overlap: int
    workspace_bytes: int
    threads: int
    grid: tuple[int, ...] = ()

    @property
    def n_tiles_dm(self) -> int:
        return math.ceil(self.ndm / self.tile_dm)

    @property
    def n_tiles_t(self) -> int:
        return math.ceil(self.nout / self.tile_t)

    @property
    def n_tiles_chan(self) -> int:
        return math.ceil(self.nchan / self.tile_chan)

    @property
    def n_tiles(self) -> int:
        """Parallel tiles (batch x DM x time); channel tiles run in order inside each."""
        return self.nbatch * self.n_tiles_dm * self.n_tiles_t

    def __str__(self) -> str:
        grid = f", CUDA grid {self.grid} x {self.threads} threads" if self.grid else ""
        return (
            f"tiling for {self.operator} ({self.dtype}): "
            f"[{self.nbatch}, {self.nchan}, {self.nsamp}] -> [{self.nbatch}, {self.ndm}, "
            f"{self.nout}]\n"
            f"  tile  dm {self.tile_dm} x time {self.tile_t} x chan {self.tile_chan}\n"
            f"  tiles {self.nbatch} batch x {self.n_tiles_dm} dm x {self.n_tiles_t} time = "
            f"{self.n_tiles} parallel, {self.n_tiles_chan} channel step(s) each{grid}\n"
            f"  overlap {self.overlap} samples, workspace {_human(self.workspace_bytes)}, "
            f"threads {self.threads}"
        )


def _human(nbytes: int) -> str:
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{nbytes} B"  # pragma: no cover


def _round_down(value: int, multiple: int) -> int:
    return max(multiple, value - value % multiple)


def plan_cpu_tiling(
    operator: str,
    shape: tuple[int, int, int],
    *,
    ndm: int,
    max_delay: int,
    itemsize: int,
    dtype: str,
    workspace_bytes: int = 0,
    facts: MachineFacts | None = None,
    tile_dm: int | None = None,
    tile_t: int | None = None,
    tile_chan: int | None = None,
) -> TilingPlan:
    """Tile sizes for a CPU kernel over input ``shape = (nbatch, nchan, nsamp)``.

    The float32 accumulators of a tile (``tile_dm x tile_t``) take about half of L2, and a
    channel slab of input ``tile_chan x (tile_t + span)`` about a third, so every DM of the
    tile sweeps a slab that is already cached (``span`` is the delay spread across the
    tile's DMs). Explicit tile sizes override the rules (tests sweep them).
    """
    facts = facts or machine_facts()
    nbatch, nchan, nsamp = shape
    nout = nsamp - max_delay
    if nout <= 0 or ndm <= 0:
        raise OperatorError(f"nothing to tile: {ndm} DMs x {nout} output samples")
    auto_t = tile_t is None
    tile_dm = tile_dm or min(32, ndm)
    if tile_t is None:
        rows = facts.l2_bytes // (2 * 4 * tile_dm)
        tile_t = min(max(64, 1 << max(rows.bit_length() - 1, 0)), 8192, nout)
    # Keep enough parallel tiles for every thread (x4 for balance).
    while (
        auto_t
        and nbatch * math.ceil(ndm / tile_dm) * math.ceil(nout / tile_t) < (4 * facts.threads)
        and tile_t > 64
    ):
        tile_t //= 2
    span = math.ceil(max_delay * tile_dm / max(ndm, 1)) + 1
    if tile_chan is None:
        fit = (facts.l2_bytes // 3) // max((tile_t + span) * itemsize, 1)
        tile_chan = min(nchan, _round_down(int(fit), 8))
    for name, value in (("tile_dm", tile_dm), ("tile_t", tile_t), ("tile_chan", tile_chan)):
        if value <= 0:
            raise OperatorError(f"{name} = {value} must be positive")
    # Channel slabs hold whole groups of eight: the summation order never depends on tiles.
    tile_chan = 8 * math.ceil(tile_chan / 8)
    return TilingPlan(
        operator=operator,
        dtype=dtype,
        nbatch=nbatch,
        nchan=nchan,
        nsamp=nsamp,
        ndm=ndm,
        nout=nout,
        tile_dm=min(tile_dm, ndm),
        tile_t=min(tile_t, nout),
        tile_chan=min(tile_chan, nchan),
        overlap=max_delay,
        workspace_bytes=workspace_bytes,
        threads=facts.threads,
    )


def plan_cuda_tiling(
    operator: str,
    shape: tuple[int, int, int],
    *,
    ndm: int,
    max_delay: int,
    dtype: str,
    facts: MachineFacts | None = None,
    threads_per_block: int = 256,
) -> TilingPlan:
    """Grid and block for the CUDA brute-force kernel: one thread per output sample.

    Grid ``x`` runs over time blocks, ``y`` over DMs (at most the device's grid-y limit per
    launch; larger DM counts are split into several launches), ``z`` over the batch.
    """
    facts = facts or machine_facts()
    nbatch, nchan, nsamp = shape
    nout = nsamp - max_delay
    threads = min(threads_per_block, facts.gpu_max_threads_per_block)
    tile_dm = min(ndm, facts.gpu_max_grid_y)
    if nbatch > facts.gpu_max_grid_z:
        raise OperatorError(f"batch of {nbatch} exceeds the CUDA grid-z limit")
    grid = (math.ceil(nout / threads), tile_dm, nbatch)
    return TilingPlan(
        operator=operator,
        dtype=dtype,
        nbatch=nbatch,
        nchan=nchan,
        nsamp=nsamp,
        ndm=ndm,
        nout=nout,
        tile_dm=tile_dm,
        tile_t=threads,
        tile_chan=nchan,
        overlap=max_delay,
        workspace_bytes=0,
        threads=threads,
        grid=grid,
    )
