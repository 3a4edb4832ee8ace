"""The verdict: one pass/fail line per check, each stating its measurement and threshold."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from drafts_ops.validation.agreement import Agreement
from drafts_ops.validation.config import EXACT_ALGORITHMS, Thresholds
from drafts_ops.validation.parity import Parity
from drafts_ops.validation.runner import path_algorithm


@dataclass(frozen=True)
class VerdictLine:
    """One check of one production path on one file."""

    file: str
    path: str
    check: str
    passed: bool
    measured: float | None
    threshold: float | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'}  {self.path}: {self.text}"


def _cmp(ok: bool) -> str:
    return "<=" if ok else ">"


def is_exact(path: str) -> bool:
    """Whether production path ``path`` must reproduce the prototype exactly."""
    return path_algorithm(path) in EXACT_ALGORITHMS


def parity_lines(file: str, parity: Parity, probe: Parity | None, t: Thresholds) -> list:
    """Exact algorithms: file and random-probe relative difference within the threshold."""
    lines = []
    for label, p in (("file", parity), ("random-data probe", probe)):
        if p is None:
            continue
        ok = p.max_rel_diff <= t.exact_max_rel_diff
        where = "" if ok else (
            f"; {p.n_differing_rows} DM trial(s) differ, worst at DM {p.worst_dm:.2f} "
            f"(index {p.worst_dm_index}), t = {p.worst_time_s:.4f} s"
        )  # fmt: skip
        lines.append(VerdictLine(
            file, p.path, f"parity ({label})", ok, p.max_rel_diff, t.exact_max_rel_diff,
            f"{label}: max rel diff {p.max_rel_diff:.3g} {_cmp(ok)} {t.exact_max_rel_diff:g} "
            f"({100 * p.frac_identical:.2f}% values identical){where}",
        ))  # fmt: skip
    return lines


def snr_loss_line(file: str, path: str, losses: list[float], t: Thresholds) -> VerdictLine:
    """Approximate algorithms: the largest S/N loss on the bursts' noise-free replicas."""
    if not losses:
        return VerdictLine(file, path, "snr loss", True, None, t.fast_max_snr_loss,
                           "no burst to measure S/N loss at (check not applicable)")  # fmt: skip
    worst = max(losses)
    ok = worst <= t.fast_max_snr_loss
    return VerdictLine(
        file, path, "snr loss", ok, worst, t.fast_max_snr_loss,
        f"max S/N loss on noise-free replicas of {len(losses)} burst(s) "
        f"{100 * worst:.2f}% {_cmp(ok)} "
        f"{100 * t.fast_max_snr_loss:g}%",
    )  # fmt: skip


def agreement_line(file: str, agreement: Agreement, t: Thresholds) -> VerdictLine:
    """Every candidate with S/N >= ``match_snr`` has a partner in the other mode."""
    n = agreement.unmatched_significant
    return VerdictLine(
        file, agreement.path, "candidates", n == 0, float(n), 0.0,
        f"{len(agreement.matched)} candidates matched (|dt| <= {t.time_tol_s:g} s, |dDM| <= "
        f"max({t.dm_tol:g}, {t.dm_tol_trials:g} trials)); {len(agreement.prototype_only)} "
        f"prototype-only, {len(agreement.production_only)} production-only; {n} unmatched "
        f"with S/N >= {t.match_snr:g} (allowed 0)",
    )  # fmt: skip


def localisation_line(file: str, path: str, loc) -> VerdictLine:
    """Where a failing exact path differs (informational, always a failure)."""
    faults = ", ".join(
        f"DM {f.dm:.2f} (index {f.dm_index}) channel {f.channel} ({f.freq_mhz:.2f} MHz) "
        f"delay {f'off by {f.shift:+d}' if f.shift is not None else 'not a pure shift'}"
        for f in loc.faults[:10]
    )
    more = f" and {len(loc.faults) - 10} more" if len(loc.faults) > 10 else ""
    text = f"differences located: {faults or 'no single channel isolated'}{more}"
    return VerdictLine(file, path, "localisation", False, None, None, text)
