"""Detection on each path's DM–time output: S/N at bursts and candidate agreement.

Every path gets the same classical search (baseline, robust noise, boxcars, giants,
friends-of-friends clustering; :mod:`drafts_ops.detect`), so differences come from the
dedispersion alone. Bursts are the injected ones of a truth table when there is one, else
the prototype's significant candidates.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from drafts_ops.core.atomic import atomic_path
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.detect.candidates import Candidate, candidates_from_clusters
from drafts_ops.detect.cluster import cluster_giants
from drafts_ops.detect.single_pulse import baseline_window, block_snr, giants_above
from drafts_ops.simulate.truth import read_truth
from drafts_ops.validation.config import Thresholds, ValidationConfig
from drafts_ops.validation.runner import PathRun, Runner
from drafts_ops.validation.snr_loss import best_boxcar, simulated_burst

#: Bursts taken from the prototype's candidates when there is no truth table.
MAX_DETECTED_BURSTS = 5


@dataclass(frozen=True)
class Detection:
    """One path's search result: its candidates (brightest first) and S/N map file."""

    path: str
    snr_path: str
    width_path: str
    candidates: list[Candidate]
    detect_s: float

    def load(self) -> tuple[np.ndarray, np.ndarray]:
        """Best boxcar S/N and width (samples) per (DM, sample), memory-mapped."""
        return np.load(self.snr_path, mmap_mode="r"), np.load(self.width_path, mmap_mode="r")


def detect_path(
    run: PathRun, plan: DMPlan, config: ValidationConfig, work_dir: str | Path, file: str = ""
) -> Detection:
    """Boxcar search of ``run``'s DM–time output; saves the S/N and width maps."""
    t0 = time.perf_counter()
    baseline = baseline_window(config.baseline_s, plan.tsamp, config.max_width_samples)
    snr, width = block_snr(
        np.asarray(run.load()), max_width=config.max_width_samples, baseline_window=baseline
    )
    giants = giants_above(snr, width, config.snr_threshold)
    candidates = candidates_from_clusters(cluster_giants(giants), plan.dms, plan.tsamp, file=file)
    elapsed = time.perf_counter() - t0
    stem = Path(work_dir) / run.name.replace("/", "-")
    paths = []
    for suffix, array in (("snr", snr), ("width", width)):
        target = stem.with_name(f"{stem.name}.{suffix}.npy")
        with atomic_path(target) as tmp, tmp.open("wb") as fh:
            np.save(fh, array)
        paths.append(str(target))
    return Detection(run.name, paths[0], paths[1], candidates, elapsed)


def dm_window(plan: DMPlan, dm: float, thresholds: Thresholds) -> float:
    """DM tolerance (pc cm^-3) at ``dm``: ``max(dm_tol, dm_tol_trials * trial spacing)``."""
    i = plan.nearest_trial(dm)
    spacing = float(np.diff(plan.dms)[min(i, plan.ndm - 2)]) if plan.ndm > 1 else 0.0
    return max(thresholds.dm_tol, thresholds.dm_tol_trials * spacing)


@dataclass(frozen=True)
class Burst:
    """A burst to measure: injected (``source="truth"``) or detected by the prototype.

    ``width_s``: intrinsic width (truth) or boxcar width (detected), s.
    """

    source: str
    dm: float
    t_s: float
    width_s: float
    truth_snr: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def truth_bursts(observation: str | Path) -> list[Burst] | None:
    """Bursts of the truth table beside ``observation`` (``NAME.truth.csv``), if any."""
    observation = Path(observation)
    table = observation.with_name(observation.stem + ".truth.csv")
    if not table.exists():
        return None

    return [
        Burst(
            "truth", float(r["dm"]), float(r["tcand_s"]), float(r["width_s"] or 0.0), r.get("snr")
        )
        for r in read_truth(table)
        if r["kind"] == "burst"
    ]


def detected_bursts(candidates: list[Candidate], thresholds: Thresholds) -> list[Burst]:
    """The prototype's brightest candidates at or above ``match_snr``."""
    strong = [c for c in candidates if c.snr >= thresholds.match_snr]
    return [Burst("detected", c.dm, c.tcand_s, c.width_s) for c in strong[:MAX_DETECTED_BURSTS]]


def replica_loss(
    reference: Runner, other: Runner, plan: DMPlan, burst: Burst, *, overlap: int, nout: int = 256
) -> float:
    """S/N loss ``1 - S/N(other) / S/N(reference)`` on a noise-free replica of ``burst``.

    The replica (same DM and width, the simulator's smearing, exact delays) arrives 64
    samples into a block of ``overlap + nout`` samples; each S/N is the best boxcar over
    the whole DM grid (:mod:`drafts_ops.validation.snr_loss`), so the loss is deterministic:
    no noise realisation favours either path.
    """

    data = simulated_burst(plan, burst.dm, 64 * plan.tsamp, burst.width_s, overlap + nout)
    ref = best_boxcar(np.asarray(reference(data)[:, :nout], np.float64), plan.nchan).snr
    got = best_boxcar(np.asarray(other(data)[:, :nout], np.float64), plan.nchan).snr
    return 1.0 - got / ref if ref > 0 else 0.0


def _window(plan: DMPlan, nout: int, burst: Burst, thresholds: Thresholds):
    """Row indices and sample slice searched around ``burst`` (``None`` if outside)."""
    tol = dm_window(plan, burst.dm, thresholds)
    rows = np.flatnonzero(np.abs(plan.dms - burst.dm) <= tol)
    if rows.size == 0:
        rows = np.array([plan.nearest_trial(burst.dm)])
    centre = round(burst.t_s / plan.tsamp)
    half = max(round(thresholds.time_tol_s / plan.tsamp), 1)
    lo, hi = max(centre - half, 0), min(centre + half + 1, nout)
    if hi <= lo or not plan.dms[0] - tol <= burst.dm <= plan.dms[-1] + tol:
        return None
    return rows, slice(lo, hi)


def snr_at(
    detection: Detection, plan: DMPlan, burst: Burst, thresholds: Thresholds
) -> dict[str, Any] | None:
    """Best S/N near ``burst`` (within the DM and time tolerances) and where it is."""
    snr, width = detection.load()
    window = _window(plan, snr.shape[1], burst, thresholds)
    if window is None:
        return None
    rows, cols = window
    patch = np.asarray(snr[rows, cols])
    d, t = np.unravel_index(int(np.argmax(patch)), patch.shape)
    row, col = int(rows[d]), cols.start + int(t)
    return {
        "snr": float(patch[d, t]),
        "dm": float(plan.dms[row]),
        "t_s": col * plan.tsamp,
        "width_samples": int(width[row, col]),
    }


def snr_vs_dm(detection: Detection, plan: DMPlan, burst: Burst, thresholds: Thresholds):
    """Best S/N per DM trial within the time tolerance of ``burst`` (list over the plan)."""
    snr, _ = detection.load()
    centre = round(burst.t_s / plan.tsamp)
    half = max(round(thresholds.time_tol_s / plan.tsamp), 1)
    lo, hi = max(centre - half, 0), min(centre + half + 1, snr.shape[1])
    if hi <= lo:
        return None
    return [float(v) for v in np.asarray(snr[:, lo:hi]).max(axis=1)]


@dataclass(frozen=True)
class Agreement:
    """Candidates of the prototype and one production path, matched one to one.

    ``matched``: pairs within the time and DM tolerances (greedy, brightest first);
    ``prototype_only`` / ``production_only``: the rest. ``unmatched_significant``: how many
    unmatched candidates (either side) reach ``match_snr``.
    """

    path: str
    matched: list[dict[str, Any]]
    prototype_only: list[dict[str, Any]]
    production_only: list[dict[str, Any]]
    unmatched_significant: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _brief(c: Candidate) -> dict[str, Any]:
    return {"tcand_s": c.tcand_s, "dm": c.dm, "snr": c.snr, "width_samples": c.width_samples}


def match_candidates(
    name: str,
    prototype: list[Candidate],
    production: list[Candidate],
    plan: DMPlan,
    thresholds: Thresholds,
) -> Agreement:
    """Match candidates within ``time_tol_s`` and the DM window (:func:`dm_window`)."""
    free = list(range(len(production)))
    matched, proto_only = [], []
    for a in sorted(prototype, key=lambda c: -c.snr):
        tol = dm_window(plan, a.dm, thresholds)
        near = [
            j
            for j in free
            if abs(production[j].tcand_s - a.tcand_s) <= thresholds.time_tol_s
            and abs(production[j].dm - a.dm) <= tol
        ]
        if not near:
            proto_only.append(_brief(a))
            continue
        j = min(near, key=lambda k: (abs(production[k].tcand_s - a.tcand_s), -production[k].snr))
        free.remove(j)
        b = production[j]
        matched.append({"prototype": _brief(a), "production": _brief(b),
                        "dt_s": b.tcand_s - a.tcand_s, "ddm": b.dm - a.dm})  # fmt: skip
    prod_only = [_brief(production[j]) for j in free]
    significant = sum(c["snr"] >= thresholds.match_snr for c in (*proto_only, *prod_only))
    return Agreement(name, matched, proto_only, prod_only, int(significant))
