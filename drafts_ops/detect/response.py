"""The bow-tie response of a burst: what a pulse at one DM looks like at the other DM
trials (its smearing and the S/N of its sidelobes), the model that clustering and the
sidelobe merge judge other giants by."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from drafts_ops.dedisp.plan import dispersion_delay_s
from drafts_ops.detect.single_pulse import Giants

if TYPE_CHECKING:
    pass


def band_edges(
    freqs_mhz: np.ndarray, bands: Sequence[tuple[float, float]], band: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest frequency (MHz) of each giant's ``band`` (0: the full band of
    ``freqs_mhz``; ``k``: ``bands[k - 1]``, a sub-band search's ``(fmin, fmax)``)."""
    freqs = np.asarray(freqs_mhz, np.float64)
    table = np.array([(freqs.min(), freqs.max()), *bands], np.float64)
    index = np.asarray(band, np.int64)
    return table[index, 0], table[index, 1]


@dataclass(frozen=True)
class Response:
    """What a burst looks like at other DM trials: the trials (pc cm^-3), the band (MHz),
    the sampling time (s), the widest boxcar (samples) and the sub-bands searched on their
    own (``(fmin, fmax)`` MHz each, for giants with ``band > 0``); see
    :func:`sidelobe_snr`."""

    dms: np.ndarray
    freqs_mhz: np.ndarray
    tsamp: float
    max_width: int = 64
    bands: tuple[tuple[float, float], ...] = ()

    def smear(self, dm_index: np.ndarray, dm0_index: int, band=0) -> np.ndarray:
        """Samples over which a pulse at trial ``dm0_index`` is smeared at ``dm_index`` (in
        the giants' ``band``: the full band, or a sub-band's narrower sweep)."""
        dms = np.asarray(self.dms, np.float64)
        delta = np.abs(dms[np.asarray(dm_index)] - dms[dm0_index])
        lo, hi = band_edges(self.freqs_mhz, self.bands, np.broadcast_to(band, delta.shape))
        return dispersion_delay_s(delta, lo, hi) / self.tsamp

    def explains(self, head: int, giants: Giants, members: np.ndarray) -> np.ndarray:
        """Which ``members`` the burst at giant ``head`` can have produced: no brighter than
        its response at their DM (in their band) and at least as wide as its smeared pulse
        (see :func:`plausible_sidelobe`)."""
        band = giants.band[members]
        smear = self.smear(giants.dm_index[members], int(giants.dm_index[head]), band)
        lo, hi = band_edges(self.freqs_mhz, self.bands, band)
        return plausible_sidelobe(giants.snr[head], giants.width[head], smear,
                                  giants.snr[members], giants.width[members], self.max_width,
                                  sweep_density_between(lo, hi))  # fmt: skip


#: Default slack (samples) of :func:`merge_sidelobes` beyond half the sum of the widths.
SIDELOBE_SLACK = 8
#: A weaker cluster is a sidelobe only if its S/N is at most this factor times the S/N the
#: brighter burst itself produces at that DM (:func:`sidelobe_snr`) plus
#: :data:`SIDELOBE_SNR_MARGIN`, and its boxcar is at least
#: :data:`SIDELOBE_WIDTH_FRACTION` of the smeared width (capped at the widest boxcar).
#: Measured on 27 simulated bright bursts (S/N 30-250, widths 0.5-8 ms, DM 100-1000, 256
#: channels at 512 us, 1200-1500 MHz): the 26 sidelobe clusters in their cones had S/N
#: 6.5-8.9 against predicted 4-30, every one within 1.0x the prediction + 3 (noise lifts
#: far-arm sidelobes over the threshold: hence the additive margin); and on 36 simulated
#: zero-DM impulses (S/N 60-180): their 8995 arm giants within 1.53x + 3 (99 % within
#: 1.11x). Boxcars of sidelobes: 23-64 samples, at least a quarter of the smeared width.
SIDELOBE_SNR_FACTOR = 1.6
SIDELOBE_SNR_MARGIN = 3.0
SIDELOBE_WIDTH_FRACTION = 0.25
#: Margin over the response at a head's own boxcar (:func:`response_at_width`): the
#: brightest of a cluster's many giants rides about 3 sigma of noise above the response.
OWN_WIDTH_MARGIN = 4.0


def sidelobe_snr(
    snr: float | np.ndarray,
    width: float | np.ndarray,
    smear: float | np.ndarray,
    max_width: float,
    density: float = 1.0,
) -> np.ndarray:
    """S/N a burst of ``snr`` and boxcar ``width`` (samples) shows at a wrong DM.

    Dedispersed at a DM off by ``dDM``, the pulse is smeared over ``smear`` samples (the
    delay of ``dDM`` across the band). The sweep is slowest at the top of the band, where
    the channels crowd ``density`` times more than on average (:func:`sweep_density`), so
    the bulk of the flux lies within ``smear / density``: the effective width is ``W =
    sqrt(width^2 + (smear / density)^2)``. The best boxcar (at most ``max_width`` samples)
    then collects ``S/N * sqrt(width / W)`` while ``W`` fits it, and ``S/N * sqrt(width *
    max_width) / W`` beyond. A top-hat model; cf. Cordes & McLaughlin 2003 for Gaussian
    pulses and a fixed boxcar.
    """
    width = np.maximum(np.asarray(width, np.float64), 1.0)
    smeared = np.sqrt(width**2 + (np.asarray(smear, np.float64) / np.maximum(density, 1.0)) ** 2)
    fits = np.asarray(snr) * np.sqrt(width / smeared)
    wider = np.asarray(snr) * np.sqrt(width * max_width) / smeared
    return np.where(smeared <= max_width, fits, wider)


def plausible_sidelobe(  # noqa: PLR0917
    snr0: float, width0: float, smear: np.ndarray, snr: np.ndarray, width: np.ndarray,
    max_width: int, density: float,
) -> np.ndarray:  # fmt: skip
    """Whether detections of ``snr`` and boxcar ``width`` (samples), ``smear`` samples of DM
    sweep away from a burst of ``snr0`` and ``width0``, can be that burst's own response:
    S/N within the predicted response (:func:`sidelobe_snr`, and
    :func:`response_at_width` at the head's own boxcar) plus
    :data:`SIDELOBE_SNR_MARGIN` (:data:`OWN_WIDTH_MARGIN`) for noise on the response, or at most
    :data:`SIDELOBE_SNR_FACTOR` times it plus the margin with a boxcar at least
    :data:`SIDELOBE_WIDTH_FRACTION` of the smeared width (capped at the widest boxcar): a
    real burst in the cone of a bright one or of an impulse is brighter, or brighter and
    narrower, than that response."""
    expected = sidelobe_snr(snr0, width0, smear, max_width, density)
    smeared = np.minimum(np.sqrt(float(width0) ** 2 + (np.asarray(smear) / density) ** 2),
                         max_width)  # fmt: skip
    snr = np.asarray(snr)
    at_own_width = response_at_width(snr0, width0, smear, width, density)
    within = snr <= np.minimum(expected + SIDELOBE_SNR_MARGIN, at_own_width + OWN_WIDTH_MARGIN)
    wide = np.asarray(width) >= SIDELOBE_WIDTH_FRACTION * smeared
    return within | (wide & (snr <= SIDELOBE_SNR_FACTOR * expected + SIDELOBE_SNR_MARGIN))


def response_at_width(
    snr0: float, width0: float, smear: np.ndarray, width: np.ndarray, density: float = 1.0
) -> np.ndarray:
    """S/N of a burst (``snr0``, boxcar ``width0`` samples) smeared by ``smear`` samples, seen
    through a boxcar of ``width`` samples: its flux spreads over ``W = sqrt(width0^2 +
    (smear / density)^2)``, so a narrower boxcar collects ``snr0 sqrt(width0 width) / W``
    and a wider one ``snr0 sqrt(width0 / width)``. A head far above this at its own width
    is not the smeared response (e.g. a narrow burst on the long plateau a zero-DM impulse
    leaves at high DM)."""
    w0 = max(float(width0), 1.0)
    w = np.maximum(np.asarray(width, np.float64), 1.0)
    smeared = np.sqrt(w0**2 + (np.asarray(smear, np.float64) / np.maximum(density, 1.0)) ** 2)
    return np.where(w < smeared, snr0 * np.sqrt(w0 * w) / smeared, snr0 * np.sqrt(w0 / w))


def sweep_density(freqs_mhz: np.ndarray) -> float:
    """Peak-to-mean density in time of a dispersed pulse's channels over the band.

    With channels uniform in frequency and delays ``∝ f^-2``, the sweep is slowest at the
    top of the band: ``f_max^3 (f_min^-2 - f_max^-2) / (2 (f_max - f_min))`` (1.4 for
    1200-1500 MHz, 1.9 for 1000-1500 MHz).
    """
    return float(sweep_density_between(np.min(freqs_mhz), np.max(freqs_mhz)))


def sweep_density_between(fmin, fmax) -> np.ndarray:
    """:func:`sweep_density` of bands ``[fmin, fmax]`` (MHz, arrays broadcast; 1 for a
    single frequency)."""
    lo, hi = np.broadcast_arrays(np.asarray(fmin, np.float64), np.asarray(fmax, np.float64))
    span = np.where(hi > lo, hi - lo, 1.0)
    density = hi**3 * (lo**-2 - hi**-2) / (2.0 * span)
    return np.where(hi > lo, density, 1.0)
