"""Radiometer noise with a bandpass, quantised to the file's sample size.

Every channel ``c`` holds ``mean_c + sigma_c * (z + s)`` before quantisation, with ``z`` a
standard-normal deviate and ``s`` the injected signal in units of that channel's noise
rms. The bandpass gain ``g_c`` scales both ``mean_c`` and ``sigma_c`` (a receiver gain
multiplies signal and noise alike), so an injected signal has the same S/N in every
channel whatever the bandpass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.io.bits import SAMPLE_DTYPES
from drafts_ops.simulate import render_kernels

Bandpass = Literal["flat", "smooth"]
BANDPASSES: tuple[Bandpass, ...] = ("flat", "smooth")

#: Noise level (mean, rms) at unit bandpass gain, per nbits; 32-bit float data carry the
#: unquantised values of the 8-bit levels.
NOISE_LEVELS: dict[int, tuple[float, float]] = {
    1: (0.5, 0.5),
    2: (1.5, 1.0),
    4: (7.5, 2.5),
    8: (128.0, 16.0),
    16: (32768.0, 2048.0),
    32: (128.0, 16.0),
}

_STREAM_SALT = 0x5EED_0F_D2AF75


@lru_cache(maxsize=1)
def _normal_table() -> np.ndarray:
    table = render_kernels.normal_table()
    table.setflags(write=False)
    return table


def bandpass_gain(freqs_mhz: np.ndarray, kind: Bandpass = "smooth") -> np.ndarray:
    """Relative gain per channel (float64, peak about 1).

    ``"flat"``: all ones. ``"smooth"``: roll-off to 0.55 at the band edges (4 % of the band)
    with a 4 % ripple of three periods across the band, like a typical L-band receiver.
    """
    freqs = np.asarray(freqs_mhz, dtype=np.float64)
    if kind == "flat":
        return np.ones_like(freqs)
    if kind != "smooth":
        raise ParameterError(f"unknown bandpass {kind!r} (use one of {BANDPASSES})")
    lo, hi = freqs.min(), freqs.max()
    x = (freqs - lo) / (hi - lo) if hi > lo else np.full_like(freqs, 0.5)
    edges = 1.0 / (1.0 + np.exp(-(x - 0.04) / 0.012)) / (1.0 + np.exp((x - 0.96) / 0.012))
    return (0.55 + 0.45 * edges) * (1.0 + 0.04 * np.sin(2 * np.pi * 3.0 * x + 0.7))


def stream_key(seed: int, stream: int = 0) -> np.uint64:
    """The 64-bit key of random stream ``stream`` for ``seed`` (noise is stream 0)."""
    mask = (1 << 64) - 1
    value = (seed * 0x9E3779B97F4A7C15 + stream * 0xD1B54A32D192ED03 + _STREAM_SALT) & mask
    return np.uint64(render_kernels.mix64(np.uint64(value)))


@dataclass(frozen=True, eq=False)
class NoiseModel:
    """Per-channel noise levels and the counter-based random stream of one observation.

    Attributes
    ----------
    mean, sigma : ndarray [nchan] float32
        Noise mean and rms of each channel before quantisation, in file units.
    nbits : int
        Sample size of the output (values are rounded and clipped below 32 bits).
    key : numpy.uint64
        Random-stream key derived from the seed.
    """

    mean: np.ndarray
    sigma: np.ndarray
    nbits: int
    key: np.uint64
    _table: np.ndarray = field(default_factory=_normal_table, repr=False)

    @classmethod
    def build(
        cls,
        freqs_mhz: np.ndarray,
        nbits: int,
        seed: int,
        bandpass: Bandpass = "smooth",
        level: tuple[float, float] | None = None,
    ) -> NoiseModel:
        """Noise for channels ``freqs_mhz`` with the default (or given) mean and rms."""
        if nbits not in NOISE_LEVELS:
            raise ParameterError(f"nbits = {nbits} is not supported (use {tuple(NOISE_LEVELS)})")
        mean0, sigma0 = NOISE_LEVELS[nbits] if level is None else level
        gain = bandpass_gain(freqs_mhz, bandpass)
        return cls(
            (mean0 * gain).astype(np.float32),
            (sigma0 * gain).astype(np.float32),
            nbits,
            stream_key(seed, 0),
        )

    @property
    def dtype(self) -> np.dtype:
        """Dtype of the generated samples (uint8 below 16 bits, uint16, float32)."""
        return SAMPLE_DTYPES[self.nbits]

    @property
    def top(self) -> np.float32:
        return np.float32(0.0 if self.nbits == 32 else (1 << self.nbits) - 1)

    def fill(self, out: np.ndarray, start: int) -> None:
        """Fill ``out [nsamp, nchan]`` with the noise of samples ``start ...``."""
        render_kernels.fill_noise(
            out, start, self.key, self.mean, self.sigma, self._table, self.top, self.nbits != 32
        )

    def add(
        self,
        out: np.ndarray,
        start: int,
        samples: np.ndarray,
        chans: np.ndarray,
        values: np.ndarray,
    ) -> None:
        """Add ``values`` (units of sigma) at unique ``(samples, chans)`` of ``out``."""
        if samples.size:
            render_kernels.add_signal(
                out,
                start,
                samples.astype(np.int64),
                chans.astype(np.int64),
                values.astype(np.float32),
                self.key,
                self.mean,
                self.sigma,
                self._table,
                self.top,
                self.nbits != 32,
            )
