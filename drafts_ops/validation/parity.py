"""Numerical parity of a production path with the prototype, and where they differ.

:func:`compare_outputs` measures two DM–time arrays: largest absolute and relative
difference, the fraction of identical values and the DM rows that differ.
:func:`locate_differences` pins a difference to DM trials and channels: dedispersion is
linear in the data, so running both paths on seeded random data with all but a group of
channels zeroed shows whether the group contributes to the difference; bisecting the
channel groups isolates each faulty channel in ``~2 log2(nchan)`` calls per channel, and
comparing that channel's lone contribution with its input shows the size of a delay error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.validation.runner import Runner

#: DM rows listed individually in reports (the count is always given).
MAX_LISTED_ROWS = 50
_ROW_CHUNK = 64


@dataclass(frozen=True)
class Parity:
    """Difference of one path's DM–time output from the prototype's.

    ``max_rel_diff`` is ``max|path - prototype| / max|prototype|`` (the scale of the
    output, so near-zero values do not inflate it). ``differing_rows``: DM trial indices
    whose largest absolute difference exceeds ``row_tolerance`` (first
    :data:`MAX_LISTED_ROWS`; ``n_differing_rows`` counts all). ``row_max_abs``: largest
    absolute difference per DM trial. ``worst_*``: where the largest difference is.
    """

    path: str
    max_abs_diff: float
    max_rel_diff: float
    frac_identical: float
    n_values: int
    scale: float
    row_tolerance: float
    n_differing_rows: int
    differing_rows: list[int]
    worst_dm_index: int
    worst_dm: float
    worst_sample: int
    worst_time_s: float
    row_max_abs: list[float] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare_outputs(
    name: str, reference: np.ndarray, other: np.ndarray, plan: DMPlan, rel_tol: float = 1e-5
) -> Parity:
    """Compare ``other`` with ``reference`` (both ``[ndm, nout]``), a block of rows at a time.

    ``rel_tol`` (relative to ``max|reference|``) sets which rows count as differing.
    """
    if reference.shape != other.shape:
        raise ParameterError(f"{name}: output shape {other.shape} != prototype's {reference.shape}")
    ndm, nout = reference.shape
    row_abs = np.zeros(ndm, np.float64)
    worst_t = np.zeros(ndm, np.int64)
    identical = 0
    scale = 0.0
    for lo in range(0, ndm, _ROW_CHUNK):
        ref = np.asarray(reference[lo : lo + _ROW_CHUNK], np.float64)
        diff = np.abs(np.asarray(other[lo : lo + _ROW_CHUNK], np.float64) - ref)
        identical += int(np.count_nonzero(diff == 0))
        row_abs[lo : lo + ref.shape[0]] = diff.max(axis=1, initial=0.0)
        worst_t[lo : lo + ref.shape[0]] = diff.argmax(axis=1) if nout else 0
        scale = max(scale, float(np.abs(ref).max(initial=0.0)))
    scale = scale or 1.0
    tol = rel_tol * scale
    rows = np.flatnonzero(row_abs > tol)
    d = int(np.argmax(row_abs))
    return Parity(
        path=name,
        max_abs_diff=float(row_abs[d]),
        max_rel_diff=float(row_abs[d] / scale),
        frac_identical=identical / max(ndm * nout, 1),
        n_values=ndm * nout,
        scale=scale,
        row_tolerance=tol,
        n_differing_rows=int(rows.size),
        differing_rows=[int(r) for r in rows[:MAX_LISTED_ROWS]],
        worst_dm_index=d,
        worst_dm=float(plan.dms[d]),
        worst_sample=int(worst_t[d]),
        worst_time_s=float(worst_t[d] * plan.tsamp),
        row_max_abs=[float(v) for v in row_abs],
    )


@dataclass(frozen=True)
class ChannelFault:
    """A channel whose contribution to DM trial ``dm_index`` differs from the prototype's.

    ``delay_expected``: the plan's delay (samples); ``shift``: the delay error in samples
    when the difference is a pure shift of the channel's data (else ``None``).
    """

    dm_index: int
    dm: float
    channel: int
    freq_mhz: float
    delay_expected: int
    shift: int | None


@dataclass(frozen=True)
class Localisation:
    """Where a path differs from the prototype on the seeded random-data probe."""

    path: str
    max_abs_diff: float
    differing_rows: list[int]
    differing_dms: list[float]
    faults: list[ChannelFault]
    calls: int
    probe: str

    @property
    def channels(self) -> list[int]:
        return sorted({f.channel for f in self.faults})

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["channels"] = self.channels
        return out


def locate_differences(
    name: str,
    reference: Runner,
    other: Runner,
    plan: DMPlan,
    data: np.ndarray,
    *,
    nout: int,
    tolerance: float = 0.0,
    max_shift: int = 8,
) -> Localisation:
    """Find the DM trials and channels where ``other`` differs from ``reference``.

    Parameters
    ----------
    reference, other
        The prototype's and the production path's runners.
    plan
        The (correct) DM plan: gives each channel's expected delay.
    data : ndarray [nchan, overlap + nout]
        Probe data (:func:`~drafts_ops.validation.runner.probe_data`).
    nout
        Output samples compared (``data.shape[1] - overlap``).
    tolerance
        Absolute difference regarded as equal (0 for exact algorithms on integer data).
    max_shift
        Largest delay error (samples) looked for when a channel is isolated.
    """
    calls = 0

    def diff(sub: np.ndarray) -> np.ndarray:
        nonlocal calls
        calls += 2
        a = np.asarray(reference(sub)[:, :nout], np.float64)
        return np.asarray(other(sub)[:, :nout], np.float64) - a

    full = np.abs(diff(data)).max(axis=1)
    rows = np.flatnonzero(full > tolerance)
    found: dict[int, np.ndarray] = {}
    if rows.size:
        _bisect(np.arange(plan.nchan), rows, data, diff, tolerance=tolerance, found=found)
    faults = []
    for channel, chan_rows in sorted(found.items()):
        lone = np.zeros_like(data)
        lone[channel] = data[channel]
        got = np.asarray(other(lone)[:, :nout], np.float64)
        calls += 1
        for d in chan_rows:
            faults.append(
                ChannelFault(
                    dm_index=int(d),
                    dm=float(plan.dms[d]),
                    channel=int(channel),
                    freq_mhz=float(plan.freqs[channel]),
                    delay_expected=int(plan.delays[d, channel]),
                    shift=_delay_shift(got[d], data[channel], int(plan.delays[d, channel]),
                                       max_shift, tolerance),
                )
            )  # fmt: skip
    return Localisation(
        path=name,
        max_abs_diff=float(full.max(initial=0.0)),
        differing_rows=[int(r) for r in rows],
        differing_dms=[float(plan.dms[r]) for r in rows],
        faults=faults,
        calls=calls,
        probe=f"seeded random uint8 data, {data.shape[0]} channels x {data.shape[1]} samples",
    )


def _bisect(channels, rows, data, diff, *, tolerance: float, found: dict[int, np.ndarray]) -> None:
    """Record in ``found`` each single channel whose lone group differs (on ``rows``)."""
    masked = np.zeros_like(data)
    masked[channels] = data[channels]
    bad = np.abs(diff(masked)[rows]).max(axis=1) > tolerance
    if not bad.any():
        return
    if channels.size == 1:
        found[int(channels[0])] = rows[bad]
        return
    half = channels.size // 2
    for part in (channels[:half], channels[half:]):
        _bisect(part, rows[bad], data, diff, tolerance=tolerance, found=found)


def _delay_shift(
    got: np.ndarray, channel_data: np.ndarray, delay: int, max_shift: int, tolerance: float
) -> int | None:
    """The ``s`` with ``got[t] == channel_data[t + delay + s]`` for every ``t``, if any."""
    n = got.size
    x = np.asarray(channel_data, np.float64)
    for s in sorted(range(-max_shift, max_shift + 1), key=abs):
        lo = delay + s
        if lo < 0 or lo + n > x.size:
            continue
        if np.abs(got - x[lo : lo + n]).max(initial=0.0) <= tolerance:
            return s
    return None
