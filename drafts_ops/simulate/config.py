"""The simulation configuration and the standard demo observation."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from drafts_ops.core.errors import ObservationError, ParameterError
from drafts_ops.dedisp.plan import dispersion_delay_s
from drafts_ops.io.header import Header
from drafts_ops.simulate.burst import BurstSpec
from drafts_ops.simulate.noise import BANDPASSES, NOISE_LEVELS, Bandpass
from drafts_ops.simulate.rfi import RFISpec


@dataclass(frozen=True, kw_only=True)
class SimulationConfig:
    """Everything that determines a simulated observation (with ``seed``, bit for bit).

    Attributes
    ----------
    nchans, fch1, foff, tsamp, nbits : int, MHz, MHz, s, bit
        As in :class:`~drafts_ops.io.header.Header` (``foff < 0``: descending channels).
    duration_s : float
        Length, s (rounded to whole samples); ignored when ``nsamples`` is given.
    nsamples : int or None
        Length in samples.
    bandpass : {"flat", "smooth"}
        Shape of the gain across the band (:func:`~drafts_ops.simulate.noise.bandpass_gain`).
    bursts : tuple of BurstSpec
        Injected bursts (lists are accepted and stored as tuples).
    rfi : tuple of RFISpec
        Interference to inject at random positions.
    seed : int
        Seed of the noise and of the RFI positions.
    noise_level : (mean, rms) or None
        Noise at unit gain in file units (default: :data:`NOISE_LEVELS` for ``nbits``).
    tstart : float
        MJD of the first sample; ``source_name`` is written to the header.
    rfi_seed : int or None
        Seed of the RFI positions (default: ``seed``); equal in the files of one
        multi-beam pointing, so that its RFI is the same in every beam.
    ibeam, nbeams : int
        Beam number and number of beams, written to the header.
    """

    nchans: int = 256
    fch1: float = 1499.4140625
    foff: float = -1.171875
    tsamp: float = 512e-6
    nbits: int = 8
    duration_s: float = 8.0
    nsamples: int | None = None
    bandpass: Bandpass = "smooth"
    bursts: tuple[BurstSpec, ...] = ()
    rfi: tuple[RFISpec, ...] = ()
    seed: int = 0
    noise_level: tuple[float, float] | None = None
    tstart: float = 60000.0
    source_name: str = "drafts-sim"
    rfi_seed: int | None = None
    ibeam: int = 0
    nbeams: int = 1
    _header: Header = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bursts", tuple(self.bursts))
        object.__setattr__(self, "rfi", tuple(self.rfi))
        self._check()
        try:
            header = Header(
                nchans=self.nchans,
                fch1=float(self.fch1),
                foff=float(self.foff),
                tsamp=float(self.tsamp),
                nbits=self.nbits,
                nsamples=self.total_samples,
                tstart=float(self.tstart),
                source_name=self.source_name,
                rawdatafile=f"drafts simulate seed={self.seed}",
                ibeam=int(self.ibeam),
                nbeams=int(self.nbeams),
            )
        except ObservationError as err:
            raise ParameterError(f"bad simulation: {err.problem}") from None
        object.__setattr__(self, "_header", header)
        self._check_signals()

    @property
    def total_samples(self) -> int:
        """Number of samples of the observation."""
        if self.nsamples is not None:
            return int(self.nsamples)
        return round(self.duration_s / self.tsamp)

    def header(self) -> Header:
        """The header of the simulated file."""
        return self._header

    def _check(self) -> None:
        if self.nbits not in NOISE_LEVELS:
            raise ParameterError(
                f"nbits = {self.nbits} is not supported: use {tuple(NOISE_LEVELS)}"
            )
        if not isinstance(self.nchans, int) or self.nchans <= 0:
            raise ParameterError(f"nchans = {self.nchans!r} must be a positive integer")
        if not (isinstance(self.tsamp, (int, float)) and math.isfinite(self.tsamp)):
            raise ParameterError(f"tsamp = {self.tsamp!r} s must be a finite number")
        if self.tsamp <= 0:
            raise ParameterError(f"tsamp = {self.tsamp} s must be positive")
        if self.nsamples is not None:
            if not isinstance(self.nsamples, int) or self.nsamples <= 0:
                raise ParameterError(f"nsamples = {self.nsamples!r} must be a positive integer")
        elif not (math.isfinite(self.duration_s) and self.duration_s >= self.tsamp):
            raise ParameterError(
                f"duration = {self.duration_s} s must be at least one sample ({self.tsamp} s)"
            )
        self._check_kinds()

    def _check_kinds(self) -> None:
        if self.nchans * self.nbits % 8:
            raise ParameterError(f"{self.nchans} channels of {self.nbits} bits is not whole bytes")
        if self.bandpass not in BANDPASSES:
            raise ParameterError(f"unknown bandpass {self.bandpass!r} (use one of {BANDPASSES})")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ParameterError(f"seed = {self.seed!r} must be an integer >= 0")
        for item in self.bursts:
            if not isinstance(item, BurstSpec):
                raise ParameterError(f"bursts must be BurstSpec, got {type(item).__name__}")
        for item in self.rfi:
            if not isinstance(item, RFISpec):
                raise ParameterError(f"rfi must be RFISpec, got {type(item).__name__}")

    def _check_signals(self) -> None:
        tobs = self._header.tobs
        for burst in self.bursts:
            if burst.t_s >= tobs:
                raise ParameterError(
                    f"burst at t = {burst.t_s} s is beyond the end of the observation ({tobs} s)"
                )
            band = burst.band_centre_mhz
            if band is not None and not self._header.fmin - 3 * burst.band_fwhm_mhz <= band <= (
                self._header.fmax + 3 * burst.band_fwhm_mhz
            ):
                raise ParameterError(
                    f"burst band centre {band} MHz lies outside the band "
                    f"{self._header.fmin:.1f}-{self._header.fmax:.1f} MHz"
                )


def demo_config() -> SimulationConfig:
    """The standard demo observation shipped as ``data/demo.fil``.

    256 channels over 1200-1500 MHz, 512 us, 8 s, 8 bits (4 MB); four bursts (S/N 12-25,
    DM 150-800, one scattered with a steep spectrum, one band-limited) and one RFI signal
    of each kind.
    """
    return SimulationConfig(
        nchans=256,
        fch1=1499.4140625,
        foff=-1.171875,
        tsamp=512e-6,
        nbits=8,
        duration_s=8.0,
        bandpass="smooth",
        seed=2024,
        source_name="drafts-demo",
        bursts=(
            BurstSpec(t_s=1.0, dm=150.0, snr=25.0, width_s=1e-3),
            BurstSpec(
                t_s=2.6, dm=400.0, snr=15.0, width_s=2e-3, scattering_s=3e-3, spectral_index=-2.0
            ),
            BurstSpec(
                t_s=4.3,
                dm=800.0,
                snr=20.0,
                width_s=1.5e-3,
                band_centre_mhz=1300.0,
                band_fwhm_mhz=120.0,
            ),
            BurstSpec(t_s=6.4, dm=250.0, snr=12.0, width_s=0.5e-3),
        ),
        rfi=(
            RFISpec(kind="persistent", count=2, strength=2.0),
            RFISpec(kind="impulsive", count=2, strength=4.0, width_s=1e-3),
            RFISpec(kind="drifting", count=1, strength=5.0, width_s=1.5),
        ),
    )


def random_bursts(
    n: int,
    header: Header,
    rng: np.random.Generator,
    *,
    dm_range: tuple[float, float] = (50.0, 1000.0),
    snr_range: tuple[float, float] = (8.0, 30.0),
    width_range_s: tuple[float, float] = (0.2e-3, 5e-3),
) -> tuple[BurstSpec, ...]:
    """``n`` bursts with uniform DM and S/N, log-uniform width, and a time at which the
    whole dispersion sweep fits in the observation (where it can)."""
    if n < 0:
        raise ParameterError(f"number of bursts {n} must be >= 0")
    if dm_range[0] < 0 or dm_range[1] < dm_range[0]:
        raise ParameterError(f"DM range {dm_range} must satisfy 0 <= min <= max")
    if snr_range[0] <= 0 or snr_range[1] < snr_range[0]:
        raise ParameterError(f"S/N range {snr_range} must satisfy 0 < min <= max")
    bursts = []
    for _ in range(n):
        dm = float(rng.uniform(*dm_range))
        sweep = float(dispersion_delay_s(dm, header.fmin, header.fmax))
        latest = max(header.tobs - sweep - 0.05 * header.tobs, 0.05 * header.tobs)
        bursts.append(
            BurstSpec(
                t_s=float(rng.uniform(0.05 * header.tobs, latest)),
                dm=dm,
                snr=float(rng.uniform(*snr_range)),
                width_s=float(np.exp(rng.uniform(*np.log(width_range_s)))),
            )
        )
    return tuple(bursts)
