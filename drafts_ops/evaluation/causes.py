"""Why a burst was missed (:func:`miss_reason`) and what a false positive is
(:func:`fp_cause`): a burst at an offset DM, a fragment of a burst, RFI of a kind, or
noise."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from drafts_ops.dedisp.plan import dispersion_delay_s
from drafts_ops.detect.candidates import Candidate
from drafts_ops.detect.response import SIDELOBE_SNR_FACTOR, SIDELOBE_SNR_MARGIN, sidelobe_snr
from drafts_ops.evaluation.matching import (
    Band,
    InjectedBurst,
    MatchWindow,
    emission_band,
    match_distance,
    match_window,
)
from drafts_ops.evaluation.setup import MIN_TIME_TOL_SAMPLES

if TYPE_CHECKING:
    pass


def miss_reason(  # noqa: PLR0917
    burst: InjectedBurst, index: int, band: Band, dms: np.ndarray,
    candidates: Sequence[Candidate], owner: np.ndarray, truth: Sequence[InjectedBurst],
) -> str:  # fmt: skip
    """Why burst ``index`` of ``truth`` has no candidate: outside the searched DM range,
    merged into another burst's candidate (one lies within 3 tolerances of it), beside a
    brighter candidate of no burst whose sweep crosses its own (:data:`BESIDE_BRIGHTER`:
    RFI or noise that the sidelobe folding may have let take it), or below the detection
    threshold."""
    if not dms[0] <= burst.dm <= dms[-1]:
        return f"outside the searched DM range {dms[0]:g}-{dms[-1]:.0f} pc cm^-3"
    if len(candidates):
        t = np.array([c.tcand_s for c in candidates])
        dm = np.array([c.dm for c in candidates])
        near = match_distance(burst, match_window(burst, band, dms), band, t, dm) <= 3.0
        others = {int(o) for o in owner[near] if o >= 0 and o != index}
        if others:
            j = min(others)
            return (f"merged into the candidate of the burst at t = {truth[j].t_s:.3f} s, "
                    f"DM {truth[j].dm:.0f}")  # fmt: skip
        crossing = [c for c, o in zip(candidates, owner, strict=True)
                    if o < 0 and c.snr > burst.snr and sweeps_cross(c, burst, band)
                    and not _within_response(c, burst, band)]  # fmt: skip
        if crossing:
            c = max(crossing, key=lambda c: c.snr)
            return (f"{BESIDE_BRIGHTER} (S/N {c.snr:.1f} at t = {c.tcand_s:.3f} s, "
                    f"DM {c.dm:.0f}) whose sweep crosses its own")  # fmt: skip
    return "below the detection threshold (no candidate near it)"


#: Start of :func:`miss_reason`'s reason for a burst missed beside a brighter candidate
#: that matches no burst (too bright to be the burst's own response) and crosses its sweep.
BESIDE_BRIGHTER = "beside a brighter candidate of no burst"


def sweeps_cross(cand: Candidate, burst: InjectedBurst, band: Band) -> bool:
    """Whether the sweep of ``cand`` (at its DM) crosses the burst's inside the burst's
    emitting band, within the larger of the candidate's and the burst's widths."""
    f_lo, f_hi = emission_band(burst, band)
    width = max(
        cand.width_s, burst.boxcar_width_s, burst.width_s, MIN_TIME_TOL_SAMPLES * band.tsamp
    )
    crossing = MatchWindow(t_tol=width, dm_tol=np.inf, f_lo=f_lo, f_hi=f_hi)  # any DM error
    t, dm = np.array([cand.tcand_s]), np.array([cand.dm])
    return bool(match_distance(burst, crossing, band, t, dm)[0] <= 1)


def on_burst_sweep(cand: Candidate, burst: InjectedBurst, band: Band) -> bool:
    """Whether ``cand`` (at any DM) can be the burst's own response: the two sweeps cross
    inside the burst's emitting band within the candidate's or the burst's width, and the
    candidate is no brighter than the burst's response there (the smear across its
    emitting band; :func:`drafts_ops.detect.response.sidelobe_snr`, with the sidelobe
    model's tolerance)."""
    return sweeps_cross(cand, burst, band) and _within_response(cand, burst, band)


def _within_response(cand: Candidate, burst: InjectedBurst, band: Band) -> bool:
    """Whether ``cand`` is no brighter than the burst's response at its DM (the smear
    across the burst's emitting band, with the sidelobe model's tolerance)."""

    f_lo, f_hi = emission_band(burst, band)
    smear = float(dispersion_delay_s(abs(cand.dm - burst.dm), f_lo, f_hi)) / band.tsamp
    w0 = max(burst.boxcar_width_s, burst.width_s, band.tsamp) / band.tsamp
    response = float(sidelobe_snr(burst.snr, w0, smear, max(w0, 64.0)))
    return cand.snr <= SIDELOBE_SNR_FACTOR * response + SIDELOBE_SNR_MARGIN


OFFSET_DM_BURST = "burst at an offset DM"


def fp_cause(
    cand: Candidate, bursts: Sequence[InjectedBurst], rfi_rows: Sequence[dict[str, Any]],
    band: Band,
) -> str:  # fmt: skip
    """Most plausible cause of a candidate that matches no burst: ``burst fragment`` when it
    lies on a burst's sweep (:func:`on_burst_sweep`), else :func:`rfi_cause`."""
    if any(on_burst_sweep(cand, b, band) for b in bursts):
        return "burst fragment"
    return rfi_cause(cand, rfi_rows, band)


def fp_causes(
    false: Sequence[Candidate], bursts: Sequence[InjectedBurst], found: Sequence[bool],
    rfi_rows: Sequence[dict[str, Any]], band: Band,
) -> list[str]:  # fmt: skip
    """:func:`fp_cause` of each false positive, telling apart the fragments that are a
    burst's only report: the brightest candidate on the sweep of a burst that no candidate
    matches (``found`` False) is :data:`OFFSET_DM_BURST` (the search saw the burst, and put
    it where noise or its spectrum pulled the peak: beyond the match's DM tolerance, where
    its own response is expected at least ~30 % fainter); further ones stay ``burst fragment``."""
    unclaimed = [i for i, hit in enumerate(found) if not hit]
    causes = [""] * len(false)
    for j in sorted(range(len(false)), key=lambda k: -false[k].snr):
        owner = next((i for i in unclaimed if on_burst_sweep(false[j], bursts[i], band)), None)
        if owner is not None:
            unclaimed.remove(owner)
            causes[j] = OFFSET_DM_BURST
        else:
            causes[j] = fp_cause(false[j], bursts, rfi_rows, band)
    return causes


def rfi_cause(cand: Candidate, rfi_rows: Sequence[dict[str, Any]], band: Band) -> str:
    """The RFI kind that most plausibly caused a false candidate: ``impulsive`` if an
    impulse arrives within the candidate's dispersion sweep (plus 50 ms), ``drifting`` if a
    drifting signal overlaps it, ``persistent`` if the file has persistent RFI and the
    candidate is at DM < 20, else ``noise``."""
    sweep = float(dispersion_delay_s(cand.dm, band.fmin_mhz, band.fmax_mhz))
    t0, t1 = cand.tcand_s - 0.05, cand.tcand_s + sweep + 0.05
    kinds = {str(r["kind"]) for r in rfi_rows}
    for r in rfi_rows:
        if r["kind"] == "rfi_impulsive" and t0 <= float(r["tcand_s"]) <= t1:
            return "impulsive"
    for r in rfi_rows:
        start = float(r["tcand_s"])
        if r["kind"] == "rfi_drifting" and start <= t1 and start + float(r["duration_s"]) >= t0:
            return "drifting"
    return "persistent" if "rfi_persistent" in kinds and cand.dm < 20 else "noise"
