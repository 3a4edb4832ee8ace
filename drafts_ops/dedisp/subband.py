"""Sub-band (two-stage) dedispersion: a sub-linear alternative to brute force.

Stage 1 splits the band into ``nsub`` sub-bands of adjacent channels and dedisperses each
at a few *nominal* DMs, relative to the sub-band's top channel ``r_s``::

    y[s, D, t] = sum_{c in s} data[c, t + delays[D, c] - delays[D, r_s]]

Stage 2 forms every DM trial ``d`` of the plan from the sub-band series of the nominal DM
that serves it::

    out[d, t] = sum_s y[s, D(d, s), t + delays[d, r_s]]

The nominal DMs are themselves plan trials, chosen per sub-band by a greedy rule: a trial
joins a nominal DM while the per-channel delay errors inside the sub-band,
``e_c = |(delays[D, c] - delays[D, r_s]) - (delays[d, c] - delays[d, r_s])|``, satisfy
``max_c e_c <= max(tol_min, beta * w_s(d))`` and ``rms_c e_c <= max(rms_min, beta *
w_s(d))`` samples, where ``w_s(d)`` is the effective width at the sub-band's lowest
frequency (sampling time and in-channel smearing, in samples). The rms bound keeps
unresolved pulses at low DM whole; the width term lets high-DM trials, smeared anyway,
share nominal DMs widely. At a
nominal DM the result equals brute force exactly. Cost per output sample is about
``sum_s nominal_s * nchan_s + ndm * nsub`` additions instead of ``ndm * nchan``; ``nsub``
is chosen to minimise it unless given. The measured S/N loss is documented in
``drafts_ops/dedisp/README.md``.

8-bit data whose sub-bands hold at most :data:`UINT16_MAX_CHANNELS` channels run stage 1
in 16-bit integers (exact, twice the SIMD lanes of float32, half the scratch bytes that
stage 2 reads): 2.2x faster on the FAST-like plan. The search hands the kernel its
normalised blocks as such samples (``detect.preprocess.prepare_block`` into uint8,
``quantised_levels``).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange

from drafts_ops.core.errors import OperatorError
from drafts_ops.dedisp.brute import _add1, _add4, _add8, accumulate_channels, tile_origin
from drafts_ops.dedisp.plan import smearing_s

#: Delay error (samples) always allowed inside a sub-band.
DEFAULT_TOL_MIN = 1.0
#: RMS delay error (samples) always allowed inside a sub-band (keeps narrow pulses whole).
RMS_MIN = 0.5
#: Fraction of the sub-band's effective width allowed as delay error.
DEFAULT_BETA = 0.3
#: Cost, in additions, of one stage-1 output sample (stored to scratch, read back by
#: stage 2): fewer, wider sub-bands win when the addition counts are close (an A/B run of
#: the decimated FAST-like plan, weights 0 vs 4: 1.2x faster with 4).
STAGE1_STORE_COST = 4


@dataclass(frozen=True, eq=False)
class SubbandPlan:
    """Stage-1 rows and the stage-2 mapping for one delay table.

    Attributes
    ----------
    edges : ndarray [nsub + 1]
        Channel boundaries of the sub-bands (file order).
    row_trial, row_c0, row_c1, row_ref : ndarray [nrow]
        Nominal trial, channel range and top (reference) channel of each stage-1 row.
    row_omin, row_extra : ndarray [nrow]
        Smallest stage-2 offset a row serves and the spread of its offsets (samples).
    row_map, offsets : ndarray [ndm, nsub]
        Row serving trial ``d`` in sub-band ``s`` and its stage-2 offset ``delays[d, r_s]``.
    max_error : int
        Largest per-channel delay error of any trial (samples).
    """

    edges: np.ndarray
    row_trial: np.ndarray
    row_c0: np.ndarray
    row_c1: np.ndarray
    row_ref: np.ndarray
    row_omin: np.ndarray
    row_extra: np.ndarray
    row_map: np.ndarray
    offsets: np.ndarray
    max_error: int
    _layouts: dict = field(default_factory=dict, repr=False)

    @functools.cached_property
    def rows(self) -> np.ndarray:
        """Stage-1 rows as one int64 array ``[nrow, 5]``: trial, c0, c1, ref, omin."""
        cols = (self.row_trial, self.row_c0, self.row_c1, self.row_ref, self.row_omin)
        return np.ascontiguousarray(np.stack(cols, axis=1), dtype=np.int64)

    @functools.cached_property
    def max_width(self) -> int:
        """Channels in the widest sub-band."""
        return int((self.row_c1 - self.row_c0).max())

    @property
    def nsub(self) -> int:
        return int(self.edges.size - 1)

    @property
    def nrow(self) -> int:
        return int(self.row_trial.size)

    def buffer_len(self, nout: int) -> int:
        """Stage-1 floats per block for ``nout`` output samples."""
        return int(self.nrow * nout + self.row_extra.sum())

    def cost(self, nout: int) -> int:
        """Additions per block: stage 1 plus stage 2."""
        widths = (self.row_c1 - self.row_c0).astype(np.int64)
        stage1 = int(np.sum(widths * (nout + self.row_extra)))
        return stage1 + self.row_map.size * nout

    def layout(self, nout: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row starts, row lengths and stage-2 read bases ``[ndm, nsub]`` for ``nout``."""
        if nout not in self._layouts:
            lengths = (nout + self.row_extra).astype(np.int64)
            ptr = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
            rows = self.row_map
            base = ptr[rows] + self.offsets - self.row_omin[rows]
            self._layouts[nout] = (ptr, lengths, np.ascontiguousarray(base, dtype=np.int64))
        return self._layouts[nout]


def _widths_samples(dms: np.ndarray, freqs: np.ndarray, tsamp: float, fmin: float) -> np.ndarray:
    chan_bw = float(np.abs(np.diff(freqs)).min()) if freqs.size > 1 else 0.0
    smear = smearing_s(dms, chan_bw, fmin) / tsamp
    return np.sqrt(1.0 + smear**2)


@njit(cache=True)
def _shares_nominal(v, top, tol, rms_tol, limit, i, j):  # noqa: PLR0917  # pragma: no cover
    """Whether trials ``i..j`` can share the nominal trial ``(i + j) // 2`` (compiled)."""
    ndm, width = v.shape
    if j >= ndm:
        return False
    m = (i + j) // 2
    vmax = 0
    for c in range(width):
        vmax = max(vmax, v[m, c])
    for d in range(i, j + 1):
        if top[d] + vmax > limit:
            return False
        worst = 0
        square = 0.0
        for c in range(width):
            err = abs(v[d, c] - v[m, c])
            worst = max(worst, err)
            square += float(err) * err
        if worst > tol[d] or np.sqrt(square / width) > rms_tol[d]:
            return False
    return True


@njit(cache=True)
def _group_end(v, top, tol, rms_tol, limit, i):  # noqa: PLR0917  # pragma: no cover
    """Largest ``j`` such that trials ``i..j`` can share the nominal trial ``(i + j) // 2``."""
    j, step = i, 1
    while _shares_nominal(v, top, tol, rms_tol, limit, i, j + step):
        j += step
        step *= 2
    while step > 1:
        step //= 2
        if _shares_nominal(v, top, tol, rms_tol, limit, i, j + step):
            j += step
    return j, (i + j) // 2


@njit(cache=True)
def _groups(v, top, tol, rms_tol, limit, row_map, first_row):  # noqa: PLR0917  # pragma: no cover
    """Split the trials of one sub-band into consecutive groups sharing a nominal trial
    (:func:`_group_end`): ``[ngroup, 3]`` (nominal trial, smallest offset, offset span)
    and the largest delay error; ``row_map[d]`` = ``first_row`` + the group of trial d."""
    ndm = v.shape[0]
    out = np.empty((ndm, 3), np.int64)
    max_error = 0
    n, i = 0, 0
    while i < ndm:
        j, m = _group_end(v, top, tol, rms_tol, limit, i)
        omin, omax = top[i], top[i]
        for d in range(i, j + 1):
            row_map[d] = first_row + n
            omin, omax = min(omin, top[d]), max(omax, top[d])
            for c in range(v.shape[1]):
                max_error = max(max_error, abs(v[d, c] - v[m, c]))
        out[n, 0], out[n, 1], out[n, 2] = m, omin, omax - omin
        n += 1
        i = j + 1
    return out[:n], max_error


def build_subband_plan(
    delays: np.ndarray,
    dms: np.ndarray,
    freqs: np.ndarray,
    tsamp: float,
    nsub: int,
    *,
    tol_min: float = DEFAULT_TOL_MIN,
    beta: float = DEFAULT_BETA,
) -> SubbandPlan:
    """Choose the nominal DMs of every sub-band for a delay table ``[ndm, nchan]``."""
    ndm, nchan = delays.shape
    if not 1 <= nsub <= nchan:
        raise OperatorError(f"nsub = {nsub} must be between 1 and nchan = {nchan}")
    edges = np.linspace(0, nchan, nsub + 1).round().astype(np.int64)
    limit = int(delays.max())
    rows: list[tuple[int, int, int, int, int, int]] = []
    row_map = np.empty((ndm, nsub), np.int64)
    offsets = np.empty((ndm, nsub), np.int64)
    max_error = 0
    for s in range(nsub):
        c0, c1 = int(edges[s]), int(edges[s + 1])
        ref = c0 + int(np.argmax(freqs[c0:c1]))
        top = delays[:, ref].astype(np.int64)
        v = delays[:, c0:c1].astype(np.int64) - top[:, None]
        width = beta * _widths_samples(dms, freqs, tsamp, freqs[c0:c1].min())
        tol = np.maximum(tol_min, width).astype(np.float64)
        rms_tol = np.maximum(RMS_MIN, width).astype(np.float64)
        v = np.ascontiguousarray(v)
        offsets[:, s] = top
        groups, error = _groups(v, top, tol, rms_tol, limit, row_map[:, s], len(rows))
        max_error = max(max_error, int(error))
        rows += [(m, c0, c1, ref, omin, span) for m, omin, span in groups.tolist()]
    cols = np.array(rows, dtype=np.int64).T
    return SubbandPlan(edges, *cols, row_map=row_map, offsets=offsets, max_error=max_error)


def auto_subband_plan(
    delays: np.ndarray,
    dms: np.ndarray,
    freqs: np.ndarray,
    tsamp: float,
    nout: int,
    *,
    tol_min: float | None = None,
    beta: float | None = None,
) -> SubbandPlan:
    """The cheapest sub-band plan over ``nsub`` in 64, 32, ..., 4.

    Cost = additions + :data:`STAGE1_STORE_COST` per stage-1 output sample. The counts are
    tried from the most sub-bands down, stopping once two in a row cost more than the best
    so far (the same choice as trying all on the FAST raw, FAST-like, GBT-like and 64- and
    16-channel plans of every DM range), which spares the slow, wide-sub-band plans of
    many channels (4 and 8 sub-bands of 4096 channels: ~0.25 s per chunk of trials).

    ``tol_min`` and ``beta`` default to :data:`DEFAULT_TOL_MIN` and :data:`DEFAULT_BETA`.
    """
    tol_min = DEFAULT_TOL_MIN if tol_min is None else tol_min
    beta = DEFAULT_BETA if beta is None else beta
    nchan = delays.shape[1]
    best, best_cost, worse = None, np.inf, 0
    for n in sorted({min(n, nchan) for n in (4, 8, 16, 32, 64)}, reverse=True):
        plan = build_subband_plan(delays, dms, freqs, tsamp, n, tol_min=tol_min, beta=beta)
        cost = plan.cost(nout) + STAGE1_STORE_COST * plan.nrow * nout
        if cost < best_cost:
            best, best_cost, worse = plan, cost, 0
        else:
            worse += 1
            if worse == 2:
                break
    return best


#: Sub-band plans by content key, least recently used dropped beyond this many.
PLAN_CACHE_SIZE = 64
_PLAN_CACHE: OrderedDict[Hashable, SubbandPlan] = OrderedDict()
_PLAN_LOCK = threading.Lock()


def content_key(*arrays: np.ndarray, extra: tuple = ()) -> str:
    """A digest of arrays' bytes, shapes and dtypes (plus ``extra``): a cache key by value."""
    digest = hashlib.sha1(repr(extra).encode())
    for array in arrays:
        flat = np.ascontiguousarray(array)
        digest.update(f"{flat.shape}{flat.dtype.str}".encode())
        digest.update(flat.data)
    return digest.hexdigest()


def cached_subband_plan(key: Hashable, build) -> SubbandPlan:
    """The sub-band plan for ``key`` (a content key: equal delay tables share one plan),
    built by ``build()`` on first use; a bounded LRU shared by every search in the process."""
    with _PLAN_LOCK:
        if key in _PLAN_CACHE:
            _PLAN_CACHE.move_to_end(key)
            return _PLAN_CACHE[key]
    plan = build()
    with _PLAN_LOCK:
        _PLAN_CACHE[key] = plan
        while len(_PLAN_CACHE) > PLAN_CACHE_SIZE:
            _PLAN_CACHE.popitem(last=False)
    return plan


@njit(parallel=True, fastmath=True, cache=True)
def subband_stage1(  # noqa: PLR0917 (kernel: positional)
    data, delays, rows, row_ptr, row_len, y, t_offset, tile_rows, tile_t
):  # pragma: no cover - compiled
    """Stage 1 into the flat buffer ``y [nbatch, total]`` for outputs from ``t_offset`` on.

    ``y`` is float32, or uint16 for uint8 data whose sub-bands hold at most
    :data:`UINT16_MAX_CHANNELS` channels (16-bit integer adds, exact: see
    :func:`integer_stage1`).

    ``rows [nrow, 5]`` holds (nominal trial, c0, c1, reference channel, omin). Tiles of
    ``tile_rows`` consecutive rows (mostly one sub-band, neighbouring nominal DMs) x
    ``tile_t`` samples run in parallel; the rows of a tile reuse one cached input slab.
    """
    nbatch, nrow = data.shape[0], rows.shape[0]
    maxlen = 0
    for r in range(nrow):
        maxlen = max(maxlen, row_len[r])
    nrb = (nrow + tile_rows - 1) // tile_rows
    ntt = (maxlen + tile_t - 1) // tile_t
    for k in prange(nbatch * nrb * ntt):
        b, r0, t0 = tile_origin(k, nrb, ntt, tile_rows, tile_t)
        for r in range(r0, min(r0 + tile_rows, nrow)):
            if t0 >= row_len[r]:
                continue
            n = min(tile_t, row_len[r] - t0)
            start = row_ptr[r] + t0
            acc = y[b, start : start + n]
            acc[:] = 0
            dl = delays[rows[r, 0]]
            shift = rows[r, 4] + t_offset + t0 - dl[rows[r, 3]]
            accumulate_channels(acc, data[b], dl, shift, rows[r, 1], rows[r, 2], n)


@njit(fastmath=True, cache=True)
def _add_subbands(acc, yb, base, d, s0, s1, t0, n):  # noqa: PLR0917  # pragma: no cover
    """``acc[:n] += sum_{s0 <= s < s1} yb[base[d, s] + t0 :][:n]``, eight sub-bands a pass."""
    s = s0
    while s + 8 <= s1:
        a0 = base[d, s] + t0
        a1 = base[d, s + 1] + t0
        a2 = base[d, s + 2] + t0
        a3 = base[d, s + 3] + t0
        a4 = base[d, s + 4] + t0
        a5 = base[d, s + 5] + t0
        a6 = base[d, s + 6] + t0
        a7 = base[d, s + 7] + t0
        _add8(
            acc, yb[a0 : a0 + n], yb[a1 : a1 + n], yb[a2 : a2 + n], yb[a3 : a3 + n],
            yb[a4 : a4 + n], yb[a5 : a5 + n], yb[a6 : a6 + n], yb[a7 : a7 + n], n,
        )  # fmt: skip
        s += 8
    while s + 4 <= s1:
        a0 = base[d, s] + t0
        a1 = base[d, s + 1] + t0
        a2 = base[d, s + 2] + t0
        a3 = base[d, s + 3] + t0
        _add4(acc, yb[a0 : a0 + n], yb[a1 : a1 + n], yb[a2 : a2 + n], yb[a3 : a3 + n], n)
        s += 4
    while s < s1:
        a0 = base[d, s] + t0
        _add1(acc, yb[a0 : a0 + n], n)
        s += 1


@njit(parallel=True, fastmath=True, cache=True)
def subband_stage2(y, base, out, tile_dm, tile_t, t_offset, nout, offset, scale):  # noqa: PLR0917
    """Stage 2: ``out[b, d, t_offset + t] = (sum_s y[b, base[d, s] + t] - offset) * scale``
    for ``t < nout`` (``offset`` 0 and ``scale`` 1: the plain sum)."""
    nbatch, ndm = out.shape[0], out.shape[1]
    nsub = base.shape[1]
    ntd = (ndm + tile_dm - 1) // tile_dm
    ntt = (nout + tile_t - 1) // tile_t
    for k in prange(nbatch * ntd * ntt):
        b, d0, t0 = tile_origin(k, ntd, ntt, tile_dm, tile_t)
        n = min(t0 + tile_t, nout) - t0
        yb = y[b]
        for d in range(d0, min(d0 + tile_dm, ndm)):
            acc = out[b, d, t_offset + t0 : t_offset + t0 + n]
            acc[:] = 0.0
            _add_subbands(acc, yb, base, d, 0, nsub, t0, n)
            if offset != 0.0 or scale != 1.0:
                for i in range(n):
                    acc[i] = (acc[i] - offset) * scale


@njit(parallel=True, fastmath=True, cache=True)
def subband_stage2_pooled(  # noqa: PLR0917 (kernel: positional)
    y,
    base,
    out,
    bands,
    groups,
    pooled,
    tile_t,
    t_offset,
    nout,
    offset,
    scale,
    band_offset,
    band_scale,
):  # pragma: no cover - compiled
    """Stage 2 of one block (``nbatch`` 1) that also max-pools its bands' partial sums.

    Each trial is summed band by band (sub-bands ``bands[q]`` to ``bands[q + 1]``), the
    bands' sums added into ``out`` as :func:`subband_stage2` writes it, and::

        pooled[q, g, t_offset + t] = max over groups[g] <= d < groups[g + 1] of
            (sum_{bands[q] <= s < bands[q + 1]} y[0, base[d, s] + t] - band_offset[q])
            * band_scale[q]

    Tiles are one group of trials x ``tile_t`` samples (no two tiles write one pooled
    value). Bands of eight sub-bands each sum in :func:`subband_stage2`'s order (integer
    stage-1 sums, as from 8-bit data, are exact in any order)."""
    nband, ngroup = bands.size - 1, groups.size - 1
    ntt = (nout + tile_t - 1) // tile_t
    yb = y[0]
    for k in prange(ngroup * ntt):
        g, t0 = k // ntt, (k % ntt) * tile_t
        n = min(t0 + tile_t, nout) - t0
        part = np.empty(n, np.float32)
        for d in range(groups[g], groups[g + 1]):
            acc = out[0, d, t_offset + t0 : t_offset + t0 + n]
            acc[:] = 0.0
            for q in range(nband):
                part[:] = 0.0
                _add_subbands(part, yb, base, d, bands[q], bands[q + 1], t0, n)
                row = pooled[q, g, t_offset + t0 : t_offset + t0 + n]
                lo, gain = band_offset[q], band_scale[q]
                if d == groups[g]:
                    for i in range(n):
                        acc[i] += part[i]
                        row[i] = (part[i] - lo) * gain
                else:
                    for i in range(n):
                        acc[i] += part[i]
                        row[i] = max(row[i], (part[i] - lo) * gain)
            if offset != 0.0 or scale != 1.0:
                for i in range(n):
                    acc[i] = (acc[i] - offset) * scale


@dataclass
class BandPooling:
    """A request to the sub-band operator: while it dedisperses, also max-pool the partial
    sums of a few bands of channels over groups of DM trials (the neural detector's
    sub-band rows, without dedispersing each band again).

    ``channel_edges`` [nband + 1] splits the channels into bands; ``trial_edges``
    [ngroup + 1] the trials into groups; ``rows`` [nband, ngroup, nout] float32 receives,
    per band, the largest over each group's trials of its sum at each output sample,
    ``(sum - channels * offset) * scale * weights[q]`` (``offset``, ``scale`` as the
    call's). The operator sets ``filled`` when it has done so: the production sub-band
    operator on the CPU, one block without per-trial decimation, whose stage-1 sub-band
    edges include every band edge; elsewhere the caller computes the rows itself.
    """

    channel_edges: np.ndarray
    trial_edges: np.ndarray
    rows: np.ndarray
    weights: np.ndarray
    filled: bool = False

    def band_subbands(self, sub: SubbandPlan, out_shape: tuple[int, ...]) -> np.ndarray | None:
        """Stage-1 sub-band edges of the bands ``[nband + 1]`` for output ``out_shape``
        ``[nbatch, ndm, nout]``; ``None`` where the request cannot be met there (several
        blocks, other trials, or a band edge that is not a sub-band edge of ``sub``)."""
        nbatch, ndm, nout = out_shape
        shape = (self.channel_edges.size - 1, self.trial_edges.size - 1, nout)
        rows_fit = (self.rows.shape == shape and self.rows.dtype == np.float32
                    and self.rows.flags.c_contiguous)  # fmt: skip
        if nbatch != 1 or int(self.trial_edges[-1]) != ndm or not rows_fit:
            return None
        where = np.searchsorted(sub.edges, self.channel_edges)
        aligned = where < sub.edges.size
        if not aligned.all() or not np.array_equal(sub.edges[where], self.channel_edges):
            return None
        return where.astype(np.int64)


#: Widest sub-band whose 8-bit sums fit uint16 (255 * 257 = 65535).
UINT16_MAX_CHANNELS = 257

#: Shortest stage-1/stage-2 pass, output samples (a plan with very many stage-1 rows, such
#: as 2048-4096 channels to DM 3000, would otherwise get passes too short to stream).
MIN_CHUNK = 512


def chunk_length(
    sub: SubbandPlan, nout: int, tile_t: int, budget_bytes: int, itemsize: int = 4
) -> int:
    """Output samples per stage-1/stage-2 pass so that the scratch (``itemsize`` bytes per
    value) fits ``budget_bytes``:
    a multiple of ``tile_t`` where one fits, else a multiple of 256 (at least
    :data:`MIN_CHUNK`, where the scratch may then exceed the budget)."""
    mean_extra = float(sub.row_extra.mean()) if sub.nrow else 0.0
    fit = int(budget_bytes / (itemsize * max(sub.nrow, 1)) - mean_extra)
    step = tile_t if fit >= tile_t else 256
    chunk = max(MIN_CHUNK, fit - fit % step)
    return min(nout, chunk)


def integer_stage1(sub: SubbandPlan, dtype: np.dtype) -> bool:
    """Whether stage 1 runs in 16-bit integers: uint8 data and no sub-band wider than
    :data:`UINT16_MAX_CHANNELS` (its sums then fit uint16 exactly). Measured on the
    FAST-like plan (one 34 888-sample block, 21 834 rows, Zen 4): float32 data 0.69 s,
    uint8 data into float32 scratch 0.61 s, uint8 into uint16 scratch 0.33 s (stage 2
    reads half the bytes too)."""
    return np.dtype(dtype) == np.uint8 and sub.max_width <= UINT16_MAX_CHANNELS


def subband_cpu(
    data: np.ndarray,
    delays: np.ndarray,
    out: np.ndarray,
    tiling,
    *,
    sub: SubbandPlan,
    y: np.ndarray,
    chunk: int,
    offset: float = 0.0,
    scale: float = 1.0,
    pooling: BandPooling | None = None,
) -> None:
    """Two-stage dedispersion of ``data [nbatch, nchan, nsamp]`` into ``out``.

    Output time is processed in passes of ``chunk`` samples; ``y`` is scratch of shape
    ``[nbatch, >= sub.buffer_len(chunk)]`` (from the pool), reused by every pass: float32,
    or uint16 where :func:`integer_stage1` allows. ``out = (sum - offset) * scale``
    (``offset`` for all channels). ``pooling`` (:class:`BandPooling`) is filled too
    where it can be (one block, band edges on sub-band edges).
    """
    nout = out.shape[2]
    bands = pooling.band_subbands(sub, out.shape) if pooling is not None else None
    if bands is not None:
        nchan = data.shape[1]
        widths = np.diff(pooling.channel_edges).astype(np.float32)
        band_offset = (offset / nchan * widths).astype(np.float32)
        band_scale = (scale * np.asarray(pooling.weights, np.float32)).astype(np.float32)
        groups = np.asarray(pooling.trial_edges, np.int64)
    for t_offset in range(0, nout, chunk):
        n = min(chunk, nout - t_offset)
        ptr, lengths, base = sub.layout(n)
        subband_stage1(
            data, delays, sub.rows, ptr, lengths, y, t_offset, tiling.tile_dm, tiling.tile_t
        )
        if bands is None:
            subband_stage2(y, base, out, tiling.tile_dm, tiling.tile_t, t_offset, n, offset, scale)
        else:
            subband_stage2_pooled(y, base, out, bands, groups, pooling.rows, tiling.tile_t,
                                  t_offset, n, offset, scale, band_offset, band_scale)  # fmt: skip
    if bands is not None:
        pooling.filled = True


def speedup_estimate(sub: SubbandPlan, nchan: int, nout: int) -> float:
    """Brute-force additions divided by sub-band additions (the algorithmic gain)."""
    return sub.row_map.shape[0] * nchan * nout / max(sub.cost(nout), 1)


__all__ = [
    "BandPooling",
    "SubbandPlan",
    "auto_subband_plan",
    "build_subband_plan",
    "cached_subband_plan",
    "chunk_length",
    "integer_stage1",
    "speedup_estimate",
    "subband_cpu",
]
