"""Simulated training and validation data for the neural models (numpy only).

Every example is drawn from a seeded generator: a random observing setup (L-band-like,
64 channels), a block of unit Gaussian noise, optionally dispersed bursts (DM, width,
scattering, spectral shape and S/N drawn from the ranges in :data:`BURST_RANGES`) and
RFI of the kinds in :data:`RFI_KINDS`. Blocks are dedispersed with the reference
dedisperser (detector) or cut out FETCH-style (classifier), then preprocessed exactly as
inference does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drafts_ops.dedisp.plan import delay_table, dispersion_delay_s, smearing_s
from drafts_ops.dedisp.reference import dedisperse_reference
from drafts_ops.ml import preprocess as pp

#: RFI families used as negatives (and as confusers beside bursts).
RFI_KINDS: tuple[str, ...] = ("narrowband", "impulsive", "drifting")

#: Ranges of the simulated bursts (documented in the model card).
BURST_RANGES: dict[str, tuple[float, float]] = {
    "snr": (6.0, 40.0),  # injected matched-filter S/N (6 + exponential, scale 7, capped)
    "width_samples": (0.5, 24.0),  # intrinsic FWHM, log-uniform, in samples
    "scattering_samples": (0.0, 16.0),  # tau at the top of the band (50% unscattered)
    "spectral_index": (-4.0, 4.0),
    "dm_fraction": (0.1, 0.9),  # DM as a fraction of the block's DM range
}
#: Channels of the simulated blocks.
NCHAN = 64
#: Detector training images: time columns (random 128-column crops are trained on).
DETECTOR_COLUMNS = 192


@dataclass(frozen=True)
class Setup:
    """An observing setup: channel frequencies (MHz, descending) and sampling time (s)."""

    freqs: np.ndarray
    tsamp: float

    @property
    def fmax(self) -> float:
        return float(self.freqs.max())


@dataclass(frozen=True)
class Burst:
    """One injected burst; ``sample`` is the arrival at the top of the band (samples)."""

    dm: float
    sample: float
    width_s: float
    scattering_s: float
    spectral_index: float
    band: tuple[float, float] | None  # (centre MHz, sigma MHz) of a band-limited burst
    snr: float


def random_setup(rng: np.random.Generator, nchan: int = NCHAN) -> Setup:
    """L-band-like setup: top 1.1-1.7 GHz, 15-30% fractional bandwidth, 0.3-1.5 ms."""
    fmax = rng.uniform(1100.0, 1700.0)
    bw = fmax * rng.uniform(0.15, 0.30)
    freqs = fmax - bw * np.arange(nchan) / nchan
    return Setup(freqs, float(rng.uniform(0.3e-3, 1.5e-3)))


def random_burst(rng: np.random.Generator, setup: Setup, dm: float, sample: float) -> Burst:
    """A burst at (``dm``, ``sample``) with random width, scattering, spectrum and S/N."""
    lo, hi = BURST_RANGES["width_samples"]
    width = np.exp(rng.uniform(np.log(lo), np.log(hi))) * setup.tsamp
    scat = 0.0 if rng.random() < 0.5 else rng.uniform(0.5, 16.0) * setup.tsamp
    band = None
    if rng.random() < 0.4:  # band-limited (a Gaussian envelope somewhere in the band)
        f = setup.freqs
        band = (float(rng.uniform(f.min(), f.max())), float(rng.uniform(0.1, 0.5) * np.ptp(f)))
    snr = min(6.0 + rng.exponential(7.0), BURST_RANGES["snr"][1])
    return Burst(float(dm), float(sample), width, scat, float(rng.uniform(-4, 4)), band, snr)


# -- signals ------------------------------------------------------------------------------
def burst_signal(setup: Setup, burst: Burst, nsamp: int) -> np.ndarray:
    """Dispersed, smeared, scattered burst ``[nchan, nsamp]`` in units of the noise sigma.

    Each channel holds a Gaussian (intrinsic width, in-channel smearing and the sample
    width added in quadrature) convolved with a one-sided exponential of time constant
    ``scattering_s * (f / fmax)**-4``, centred on the dispersed arrival time. The whole
    burst is scaled so that the ideal matched-filter S/N of the band sum dedispersed at
    the burst DM (integer delays, as the dedispersers use) is ``burst.snr``.
    """
    f, ts = setup.freqs, setup.tsamp
    delay = dispersion_delay_s(burst.dm, f, setup.fmax) / ts  # samples
    smear = smearing_s(burst.dm, abs(f[1] - f[0]), f) / ts
    sigma = np.sqrt((burst.width_s / ts / 2.355) ** 2 + (smear / 2.355) ** 2 + 1 / 12)
    tau = burst.scattering_s / ts * (f / setup.fmax) ** -4.0
    length = int(np.ceil(np.max(12 * sigma + 10 * tau))) + 4
    arrival = burst.sample + delay
    first = np.floor(arrival - 6 * sigma).astype(np.int64) - 1  # window start per channel
    k = first[:, None] + np.arange(length)[None, :]
    x = k - arrival[:, None]
    prof = np.exp(-0.5 * (x / sigma[:, None]) ** 2) / sigma[:, None]
    if burst.scattering_s > 0:
        t = np.arange(length, dtype=np.float64)
        kernel = np.exp(-t[None, :] / tau[:, None]) / tau[:, None]
        n = 2 * length
        prof = np.fft.irfft(np.fft.rfft(prof, n) * np.fft.rfft(kernel, n), n)[:, :length]
    amp = (f / f.mean()) ** burst.spectral_index
    if burst.band is not None:
        amp = amp * np.exp(-0.5 * ((f - burst.band[0]) / burst.band[1]) ** 2)
    prof = prof * amp[:, None]
    # dedispersed band sum: shift each channel back by its integer delay
    lag = k - np.rint(delay).astype(np.int64)[:, None]
    series = np.zeros(int(lag.max() - lag.min()) + 1)
    np.add.at(series, (lag - lag.min()).ravel(), prof.ravel())
    power = float(np.sqrt(np.sum(series**2) / f.size))
    prof *= burst.snr / power if power > 0 else 0.0
    out = np.zeros((f.size, nsamp), np.float32)
    inside = (k >= 0) & (k < nsamp)
    rows = np.broadcast_to(np.arange(f.size)[:, None], k.shape)
    out[rows[inside], k[inside]] = prof[inside]
    return out


def rfi_signal(rng: np.random.Generator, setup: Setup, kind: str, nsamp: int) -> np.ndarray:
    """One RFI feature ``[nchan, nsamp]`` (noise sigma units) of ``kind`` (see RFI_KINDS)."""
    nchan = setup.freqs.size
    out = np.zeros((nchan, nsamp), np.float32)
    if kind == "narrowband":  # persistent: a few channels, bright, fluctuating
        c0 = rng.integers(0, nchan - 3)
        nc = rng.integers(1, 4)
        level = rng.uniform(2.0, 20.0)
        out[c0 : c0 + nc] = level * (1 + 0.5 * rng.standard_normal((nc, nsamp)))
    elif kind == "impulsive":  # broadband, undispersed (zero DM)
        for _ in range(rng.integers(1, 4)):
            t0 = rng.integers(0, nsamp)
            w = rng.integers(1, 6)
            spectrum = rng.uniform(1.0, 8.0) * (1 + 0.3 * rng.standard_normal(nchan))
            out[:, t0 : t0 + w] += spectrum[:, None]
    elif kind == "drifting":  # narrow-band line sweeping in frequency
        t0 = rng.integers(0, nsamp)
        length = rng.integers(20, max(21, nsamp // 2))
        rate = rng.uniform(-1.0, 1.0) * nchan / length  # channels per sample
        c_start = rng.uniform(0, nchan)
        level = rng.uniform(3.0, 12.0)
        for k in range(t0, min(t0 + length, nsamp)):
            c = int(c_start + rate * (k - t0))
            if 0 <= c < nchan:
                out[max(c - 1, 0) : c + 1, k] += level
    else:
        raise ValueError(f"unknown RFI kind {kind!r}")
    return out


def noise_block(rng: np.random.Generator, nchan: int, nsamp: int) -> np.ndarray:
    """Unit Gaussian noise ``[nchan, nsamp]`` float32."""
    return rng.standard_normal((nchan, nsamp), dtype=np.float32)


# -- detector examples ----------------------------------------------------------------------
@dataclass(frozen=True)
class DetectorBlock:
    """A simulated block: raw data ``[nchan, nsamp]``, its DM-time ``[ndm, columns]``."""

    setup: Setup
    data: np.ndarray
    dm_time: np.ndarray
    dms: np.ndarray
    bursts: list[Burst]
    rfi: tuple[str, ...]


def detector_example(
    rng: np.random.Generator,
    *,
    n_bursts: int | None = None,
    rfi: tuple[str, ...] | None = None,
    columns: int = DETECTOR_COLUMNS,
    snr: float | None = None,
    tail: int = 0,
) -> DetectorBlock:
    """One simulated block and its DM-time image (DM trials 0..dm_max, uniform).

    ``n_bursts``/``rfi`` default to a random mix: 0-2 bursts and, independently, each RFI
    kind with probability 1/4. ``snr`` fixes the bursts' S/N; ``tail`` adds raw samples
    after the block (room for cutouts). Burst ``sample`` is a DM-time column.
    """
    setup = random_setup(rng)
    dm_max = rng.uniform(150.0, 1200.0)
    dms = np.linspace(0.0, dm_max, int(rng.integers(48, 257)))
    delays = delay_table(dms, setup.freqs, setup.tsamp)
    nsamp = columns + int(delays.max()) + tail
    if n_bursts is None:
        n_bursts = int(rng.choice([0, 1, 1, 1, 2]))
    if rfi is None:
        rfi = tuple(k for k in RFI_KINDS if rng.random() < 0.25)
    data = noise_block(rng, setup.freqs.size, nsamp)
    lo, hi = BURST_RANGES["dm_fraction"]
    bursts = [
        random_burst(rng, setup, rng.uniform(lo, hi) * dm_max, rng.uniform(6, columns - 6))
        for _ in range(n_bursts)
    ]
    if snr is not None:
        bursts = [Burst(**{**b.__dict__, "snr": float(snr)}) for b in bursts]
    for burst in bursts:
        data += burst_signal(setup, burst, nsamp)
    for kind in rfi:
        data += rfi_signal(rng, setup, kind, nsamp)
    dm_time = dedisperse_reference(data, delays)[:, :columns]
    return DetectorBlock(setup, data, dm_time, dms, bursts, tuple(rfi))


def dm_index(dms: np.ndarray, dm: float) -> float:
    """Fractional index of ``dm`` in the increasing DM trials ``dms``."""
    return float(np.interp(dm, dms, np.arange(dms.size)))


def detector_pool(
    rng: np.random.Generator, n: int
) -> tuple[np.ndarray, list[list[tuple[float, float]]]]:
    """``n`` preprocessed detector images ``[n, 64, 192]`` and their burst centres
    (row, col) in detector-pixel coordinates."""
    images, centres = [], []
    for _ in range(n):
        block = detector_example(rng)
        images.append(pp.prepare_dm_time(block.dm_time, 1))
        rows, cols = pp.input_to_detector_coords(
            np.array([dm_index(block.dms, b.dm) for b in block.bursts]),
            np.array([b.sample for b in block.bursts]),
            block.dms.size,
            1,
        )
        centres.append(list(zip(rows.tolist(), cols.tolist(), strict=True)))
    return np.stack(images), centres


# -- classifier examples ------------------------------------------------------------------
#: Kinds of classifier examples and their share of a training pool.
CLASSIFIER_MIX: dict[str, float] = {
    "burst": 0.5,
    "noise": 0.14,
    "narrowband": 0.12,
    "impulsive": 0.12,
    "drifting": 0.12,
}


@dataclass(frozen=True)
class Candidate:
    """Where a search would put a candidate: DM (pc cm^-3), top-of-band sample, width."""

    dm: float
    sample: int
    width_samples: int


def search_candidate(rng: np.random.Generator, burst: Burst, tsamp: float) -> Candidate:
    """A candidate as a search reports the burst: DM and time jittered, width rounded."""
    width = max(burst.width_s + burst.scattering_s, tsamp) / tsamp
    width = width * 2.0 ** rng.uniform(-1.0, 1.0)
    if rng.random() < 0.25:
        width = float(rng.integers(1, 3))
    sample = round(burst.sample + rng.normal(0.0, 0.3 * width + 0.5))
    dm = max(burst.dm * (1.0 + rng.normal(0.0, 0.01)) + rng.normal(0.0, 1.0), 0.0)
    return Candidate(dm, int(sample), max(1, round(width)))


def cutout_pair(data: np.ndarray, setup: Setup, cand: Candidate) -> tuple[np.ndarray, np.ndarray]:
    """FETCH-style freq-time ``[256 time, 256 freq]`` and DM-time ``[256, 256]`` cutouts."""
    from drafts_ops.detect.cutouts import dm_time_cutout, freq_time_cutout

    args = (data, setup.freqs, setup.tsamp, cand.dm, cand.sample, cand.width_samples)
    return freq_time_cutout(*args), dm_time_cutout(*args)


def classifier_example(
    rng: np.random.Generator, kind: str, snr: float | None = None
) -> tuple[np.ndarray, np.ndarray, Candidate, Burst | None]:
    """One candidate's cutouts of ``kind`` (a key of :data:`CLASSIFIER_MIX`).

    Returns (freq-time, DM-time, candidate, burst or None). ``snr`` fixes a burst's S/N.
    """
    from drafts_ops.detect.cutouts import cutout_span

    setup = random_setup(rng)
    ts = setup.tsamp
    burst = None
    if kind == "burst":
        burst = random_burst(rng, setup, rng.uniform(30.0, 1000.0), 0.0)
        if snr is not None:
            burst = Burst(**{**burst.__dict__, "snr": float(snr)})
        cand = search_candidate(rng, burst, ts)
    else:
        cand = Candidate(
            float(rng.uniform(0.0, 1000.0) if kind != "impulsive" else rng.uniform(0.0, 150.0)),
            0,
            int(2 ** rng.integers(0, 5)),
        )
    start, stop = cutout_span(setup.freqs, ts, cand.dm, 0, cand.width_samples)
    nsamp = stop - start
    shift = -start  # put sample 0 of the candidate at column `shift` of the block
    cand = Candidate(cand.dm, cand.sample + shift, cand.width_samples)
    data = noise_block(rng, setup.freqs.size, nsamp)
    if burst is not None:
        burst = Burst(**{**burst.__dict__, "sample": float(shift)})
        data += burst_signal(setup, burst, nsamp)
        cand = Candidate(cand.dm, cand.sample, cand.width_samples)
    elif kind in RFI_KINDS:
        data += _rfi_near(rng, setup, kind, nsamp, shift)
    ft, dt = cutout_pair(data, setup, cand)
    return ft, dt, cand, burst


def _rfi_near(
    rng: np.random.Generator, setup: Setup, kind: str, nsamp: int, sample: int
) -> np.ndarray:
    """RFI of ``kind`` placed where a search would trigger on it (near ``sample``)."""
    sig = rfi_signal(rng, setup, kind, nsamp)
    if kind in ("impulsive", "drifting"):  # move the feature to the candidate's time
        first = int(np.argmax(np.abs(sig).sum(axis=0) > 0))
        sig = np.roll(sig, sample - first + int(rng.integers(-3, 4)), axis=1)
    return sig


def classifier_pool(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` preprocessed classifier examples: freq-time and DM-time ``[n, 64, 64]`` and
    labels ``[n]`` (1 = burst), drawn in the proportions of :data:`CLASSIFIER_MIX`."""
    kinds = rng.choice(list(CLASSIFIER_MIX), size=n, p=list(CLASSIFIER_MIX.values()))
    fts, dts = [], []
    for kind in kinds:
        ft, dt, _, _ = classifier_example(rng, str(kind))
        fts.append(pp.prepare_freq_time(ft))
        dts.append(pp.prepare_dm_time_cutout(dt))
    return np.stack(fts), np.stack(dts), (kinds == "burst").astype(np.float32)
