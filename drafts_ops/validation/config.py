"""Parameters of a validation run and the thresholds of its verdict."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from drafts_ops.core.errors import ParameterError

#: Algorithms whose output must equal the prototype's (others are approximations whose
#: S/N loss is bounded instead).
EXACT_ALGORITHMS: frozenset[str] = frozenset({"brute"})


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """Pass/fail thresholds of the verdict (each one is printed in the report).

    Attributes
    ----------
    exact_max_rel_diff : float
        Exact algorithms: largest ``max|production - prototype| / max|prototype|``.
    fast_max_snr_loss : float
        Approximate algorithms (sub-band, FDMT): largest fractional S/N loss at any burst,
        ``1 - snr / snr_prototype`` (issue 4 documents the goal: under 5 %).
    match_snr : float
        Every candidate at or above this S/N, in either mode, must have a partner in the
        other mode.
    time_tol_s : float
        Candidates (and bursts) match when their arrival times differ by at most this, s.
    dm_tol : float
        ... and their DMs by at most ``max(dm_tol, dm_tol_trials * local trial spacing)``,
        pc cm^-3.
    dm_tol_trials : float
        DM tolerance in trial spacings (see ``dm_tol``).
    """

    exact_max_rel_diff: float = 1e-5
    fast_max_snr_loss: float = 0.05
    match_snr: float = 8.0
    time_tol_s: float = 0.01
    dm_tol: float = 5.0
    dm_tol_trials: float = 2.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not (math.isfinite(value) and value >= 0):
                raise ParameterError(f"threshold {f.name} = {value} must be finite and >= 0")

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class DelayFault:
    """A deliberate off-by-``shift`` delay in one (DM trial, channel) cell of the plan that a
    production algorithm is given: the validator's self-test (it must fail and locate it).
    """

    dm_index: int
    channel: int
    shift: int = 1
    algorithm: str = "brute"

    @classmethod
    def parse(cls, text: str) -> DelayFault:
        """``"DM_INDEX,CHANNEL[,SHIFT[,ALGORITHM]]"`` (command-line form)."""
        parts = [p.strip() for p in text.split(",")]
        try:
            if not 2 <= len(parts) <= 4:
                raise ValueError("need 2 to 4 comma-separated fields")
            numbers = [int(p) for p in parts[:3]]
        except ValueError as err:
            raise ParameterError(f"bad delay fault {text!r}: {err}") from None
        return cls(*numbers, *parts[3:])  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class ValidationConfig:
    """What to validate and how.

    Attributes
    ----------
    dm_min, dm_max, dm_step, dm_tol : float
        DM plan (pc cm^-3); ``dm_step=None`` uses the tolerance rule with ``dm_tol``.
    dm_ranges : bool
        Validate the search's DM ranges (``drafts plan``), each at its own time
        resolution (the file's samples averaged as the search averages them); ``False``,
        or a fixed ``dm_step``: one plan at the file's resolution.
    algorithms : tuple of str or None
        Production algorithms to compare with the prototype (default: every production
        algorithm registered and available for ``backend``).
    backend : str
        ``"cpu"`` or ``"cuda"``, for both modes.
    block_size : int
        New samples per streamed block; blocks overlap by the plan's maximum delay.
    max_samples : int or None
        Validate only the first ``max_samples`` samples of each file.
    snr_threshold, max_width_samples, baseline_s : float, int, float
        Boxcar search of the DM–time outputs (same search for every mode).
    thresholds : Thresholds
        The verdict's thresholds.
    delay_fault : DelayFault or None
        Deliberately broken production path (self-test of the validator).
    probe_samples : int
        Output samples of the seeded random-data probe used for parity and localisation.
    repeats : int
        Streamed passes per path; timings are of the fastest pass.
    """

    dm_min: float = 0.0
    dm_max: float = 1000.0
    dm_step: float | None = None
    dm_tol: float = 1.25
    dm_ranges: bool = True
    algorithms: tuple[str, ...] | None = None
    backend: str = "cpu"
    block_size: int = 8192
    max_samples: int | None = None
    snr_threshold: float = 6.5
    max_width_samples: int = 32
    baseline_s: float = 1.0
    thresholds: Thresholds = Thresholds()
    delay_fault: DelayFault | None = None
    probe_samples: int = 1024
    repeats: int = 1

    def __post_init__(self) -> None:
        if self.algorithms is not None:
            object.__setattr__(self, "algorithms", tuple(self.algorithms))
        problems = []
        if not (0 <= self.dm_min <= self.dm_max and math.isfinite(self.dm_max)):
            problems.append(f"DM range {self.dm_min}..{self.dm_max} pc cm^-3")
        if self.dm_step is not None and not self.dm_step > 0:
            problems.append(f"dm_step = {self.dm_step}")
        for name in ("block_size", "max_width_samples", "probe_samples", "repeats"):
            if int(getattr(self, name)) < 1:
                problems.append(f"{name} = {getattr(self, name)} (must be >= 1)")
        if self.max_samples is not None and self.max_samples < 1:
            problems.append(f"max_samples = {self.max_samples}")
        if not (self.snr_threshold > 0 and self.baseline_s > 0):
            problems.append("snr_threshold and baseline_s must be positive")
        if problems:
            raise ParameterError("bad validation configuration: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
