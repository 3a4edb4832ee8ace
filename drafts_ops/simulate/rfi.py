"""Radio-frequency interference: three kinds, drawn at random positions from the seed.

* ``persistent``: narrow-band channels that carry an amplitude-modulated carrier for the
  whole observation (``count`` distinct channels).
* ``impulsive``: broadband, undispersed (DM 0) pulses in every channel (``count`` events).
* ``drifting``: narrow-band signals whose frequency drifts linearly in time (``count``).

Strengths are per channel and sample, in units of the channel's noise rms (peak values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.simulate.burst import (
    FWHM_PER_SIGMA,
    BurstSpec,
    RenderedBurst,
    best_boxcar,
    dedispersed_profile,
    unit_profile,
)

RFIKind = Literal["persistent", "impulsive", "drifting"]
RFI_KINDS: tuple[RFIKind, ...] = get_args(RFIKind)

#: Default width (s) per kind: impulsive pulse FWHM, drifting signal duration.
_DEFAULT_WIDTH = {"persistent": 0.0, "impulsive": 1e-3, "drifting": 1.0}


@dataclass(frozen=True, kw_only=True)
class RFISpec:
    """One kind of interference to inject.

    Attributes
    ----------
    kind : {"persistent", "impulsive", "drifting"}
        See the module docstring.
    count : int
        Number of channels (persistent) or events (impulsive, drifting).
    strength : float
        Peak amplitude per channel and sample, in units of the channel noise rms.
    width_s : float or None
        Impulsive: FWHM of the pulse (default 1 ms). Drifting: duration (default 1 s).
        Ignored for persistent RFI.
    bandwidth_mhz : float or None
        Drifting: FWHM of the signal in frequency (default two channels).
    """

    kind: RFIKind
    count: int = 1
    strength: float = 5.0
    width_s: float | None = None
    bandwidth_mhz: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in RFI_KINDS:
            raise ParameterError(f"unknown RFI kind {self.kind!r} (use one of {RFI_KINDS})")
        if not isinstance(self.count, int) or self.count < 0:
            raise ParameterError(f"RFI count = {self.count!r} must be an integer >= 0")
        if not (isinstance(self.strength, (int, float)) and math.isfinite(self.strength)):
            raise ParameterError(f"RFI strength = {self.strength!r} must be a finite number")
        if self.strength <= 0:
            raise ParameterError(f"RFI strength = {self.strength} must be positive")
        for name in ("width_s", "bandwidth_mhz"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ParameterError(f"RFI {name} = {value!r} must be positive")

    @property
    def width(self) -> float:
        """The pulse width or duration (s) in effect."""
        return _DEFAULT_WIDTH[self.kind] if self.width_s is None else float(self.width_s)


def _truth(kind: str, **values: float) -> dict[str, object]:
    return {"kind": f"rfi_{kind}", **values}


@dataclass(frozen=True, eq=False)
class PersistentRFI:
    """A carrier in channel ``chan``: ``strength * (1 + 0.5 sin(..slow..) + 0.3 sin(..fast..))``."""

    chan: int
    freq_mhz: float
    strength: float
    tsamp: float
    tobs: float
    periods_s: tuple[float, float]
    phases: tuple[float, float]

    def entries(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        samples = np.arange(start, stop, dtype=np.int64)
        t = samples * self.tsamp
        (p1, p2), (f1, f2) = self.periods_s, self.phases
        values = self.strength * (
            1.0 + 0.5 * np.sin(2 * np.pi * t / p1 + f1) + 0.3 * np.sin(2 * np.pi * t / p2 + f2)
        )
        return samples, np.full(samples.size, self.chan, np.int64), values.astype(np.float32)

    def truth(self) -> dict[str, object]:
        return _truth(
            "persistent",
            tcand_s=0.0,
            duration_s=self.tobs,
            freq_lo_mhz=self.freq_mhz,
            freq_hi_mhz=self.freq_mhz,
            strength_sigma=self.strength,
        )


@dataclass(frozen=True, eq=False)
class ImpulsiveRFI:
    """A broadband DM-0 pulse with a gently tilted spectrum."""

    rendered: RenderedBurst
    snr: float
    strength: float
    freqs: tuple[float, float]
    tsamp: float

    def entries(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.rendered.entries(start, stop)

    def truth(self) -> dict[str, object]:
        spec = self.rendered.spec
        return _truth(
            "impulsive",
            tcand_s=spec.t_s,
            dm=0.0,
            width_s=spec.width_s,
            snr=self.snr,
            spectral_index=spec.spectral_index,
            boxcar_width_s=self.rendered.boxcar_width * self.tsamp,
            freq_lo_mhz=self.freqs[0],
            freq_hi_mhz=self.freqs[1],
            strength_sigma=self.strength,
        )


@dataclass(frozen=True, eq=False)
class DriftingRFI:
    """A narrow-band signal at ``f0 + rate * (t - t0)`` for ``t0 <= t < t0 + duration``."""

    t0: float
    duration: float
    f0: float
    rate_mhz_s: float
    fwhm_mhz: float
    strength: float
    freqs: np.ndarray
    tsamp: float

    def entries(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        first = max(start, math.ceil(self.t0 / self.tsamp))
        last = min(stop, math.ceil((self.t0 + self.duration) / self.tsamp))
        if last <= first:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
        samples = np.arange(first, last, dtype=np.int64)
        centre = self.f0 + self.rate_mhz_s * (samples * self.tsamp - self.t0)
        sigma = self.fwhm_mhz / FWHM_PER_SIGMA
        near = np.flatnonzero(
            (self.freqs >= centre.min() - 5 * sigma) & (self.freqs <= centre.max() + 5 * sigma)
        )
        values = self.strength * np.exp(
            -0.5 * ((self.freqs[near][None, :] - centre[:, None]) / sigma) ** 2
        )
        keep = values > 1e-4 * self.strength
        rows, cols = np.nonzero(keep)
        return samples[rows], near[cols].astype(np.int64), values[keep].astype(np.float32)

    def truth(self) -> dict[str, object]:
        f1 = self.f0 + self.rate_mhz_s * self.duration
        return _truth(
            "drifting",
            tcand_s=self.t0,
            duration_s=self.duration,
            width_s=self.duration,
            freq_lo_mhz=min(self.f0, f1),
            freq_hi_mhz=max(self.f0, f1),
            strength_sigma=self.strength,
        )


RFIComponent = PersistentRFI | ImpulsiveRFI | DriftingRFI


def realise_rfi(
    spec: RFISpec, freqs_mhz: np.ndarray, tsamp: float, nsamples: int, rng: np.random.Generator
) -> list[RFIComponent]:
    """Place ``spec.count`` RFI signals of ``spec.kind`` at random (from ``rng``)."""
    freqs = np.asarray(freqs_mhz, dtype=np.float64)
    tobs = nsamples * tsamp
    if spec.kind == "persistent":
        if spec.count > freqs.size:
            raise ParameterError(f"{spec.count} persistent RFI channels but {freqs.size} exist")
        chans = rng.choice(freqs.size, size=spec.count, replace=False)
        return [
            PersistentRFI(
                int(c),
                float(freqs[c]),
                spec.strength,
                tsamp,
                tobs,
                (float(rng.uniform(0.5, 3.0)) * tobs, float(rng.uniform(20, 200)) * tsamp),
                (float(rng.uniform(0, 2 * np.pi)), float(rng.uniform(0, 2 * np.pi))),
            )
            for c in chans
        ]
    if spec.kind == "impulsive":
        return [_impulse(spec, freqs, tsamp, tobs, rng) for _ in range(spec.count)]
    return [_drifter(spec, freqs, tsamp, tobs, rng) for _ in range(spec.count)]


def _impulse(
    spec: RFISpec, freqs: np.ndarray, tsamp: float, tobs: float, rng: np.random.Generator
) -> ImpulsiveRFI:
    t = float(rng.uniform(0.02, 0.98) * tobs)
    tilt = float(rng.uniform(-1.0, 1.0))
    shape = BurstSpec(t_s=t, dm=0.0, snr=1.0, width_s=spec.width, spectral_index=tilt)
    first, profile = unit_profile(freqs, tsamp, shape)
    profile *= spec.strength / profile.max()
    _, series = dedispersed_profile(first, profile, np.zeros(freqs.size, np.int64))
    snr, width, _ = best_boxcar(series, freqs.size)
    rendered = RenderedBurst(shape, first, profile.astype(np.float32), spec.strength, width)
    return ImpulsiveRFI(
        rendered, snr, spec.strength, (float(freqs.min()), float(freqs.max())), tsamp
    )


def _drifter(
    spec: RFISpec, freqs: np.ndarray, tsamp: float, tobs: float, rng: np.random.Generator
) -> DriftingRFI:
    duration = min(spec.width, 0.9 * tobs)
    t0 = float(rng.uniform(0.0, tobs - duration))
    span = float(freqs.max() - freqs.min())
    fwhm = spec.bandwidth_mhz or 2.0 * span / max(freqs.size - 1, 1)
    drift = float(rng.uniform(0.05, 0.3) * span * rng.choice([-1.0, 1.0]))
    lo = freqs.min() + max(0.0, -drift)
    hi = freqs.max() - max(0.0, drift)
    f0 = float(rng.uniform(lo, hi))
    return DriftingRFI(t0, duration, f0, drift / duration, fwhm, spec.strength, freqs, tsamp)
