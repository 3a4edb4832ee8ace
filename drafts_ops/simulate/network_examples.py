"""Simulated training and validation data for the neural models.

Every example comes from the project's simulator (:mod:`drafts_ops.simulate`, unquantised
32-bit samples with a smooth bandpass) with a seed drawn from the caller's generator: a
random L-band-like setup of 64 channels, bursts over the ranges of :data:`BURST_RANGES`
and RFI of every kind of :data:`drafts_ops.simulate.RFI_KINDS`. Blocks are cleaned as the
search pipeline does (:func:`drafts_ops.detect.preprocess.preprocess_block`: per-channel
normalisation and automatic channel masking), then dedispersed with the reference
dedisperser (detector) or cut out FETCH-style with :mod:`drafts_ops.detect.cutouts`
(classifier), and finally preprocessed exactly as inference does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from drafts_ops.dedisp.plan import delay_table, tolerance_dm_trials
from drafts_ops.dedisp.reference import dedisperse_reference
from drafts_ops.detect.cutouts import cutout_span, dm_time_cutout, freq_time_cutout
from drafts_ops.detect.preprocess import preprocess_block
from drafts_ops.ml import inputs as pp
from drafts_ops.simulate import RFI_KINDS, BurstSpec, RFISpec, Simulation, SimulationConfig

#: Ranges of the simulated bursts (documented in the model card).
BURST_RANGES: dict[str, tuple[float, float]] = {
    "snr": (6.0, 40.0),  # simulator S/N (best dedispersed boxcar): 6 + exponential(7), capped
    "width_samples": (0.5, 24.0),  # intrinsic FWHM, log-uniform, in samples
    "scattering_samples": (0.5, 16.0),  # tau at the top of the band; half of bursts have none
    "spectral_index": (-4.0, 4.0),
    "dm_fraction": (0.1, 0.9),  # detector: DM as a fraction of the block's DM range
    "dm": (30.0, 1000.0),  # classifier, pc cm^-3
}
#: Channels of the simulated blocks.
NCHAN = 64
#: Detector training images: time columns (random 128-column crops are trained on).
DETECTOR_COLUMNS = 192


@dataclass(frozen=True)
class Setup:
    """An observing setup: 64 descending channels from ``fch1`` (MHz), ``tsamp`` (s)."""

    fch1: float
    foff: float
    tsamp: float
    nchans: int = NCHAN

    @property
    def freqs(self) -> np.ndarray:
        return self.fch1 + self.foff * np.arange(self.nchans)


def random_setup(rng: np.random.Generator) -> Setup:
    """L-band-like setup: top 1.1-1.7 GHz, 15-30% fractional bandwidth, 0.3-1.5 ms."""
    fch1 = float(rng.uniform(1100.0, 1700.0))
    foff = -fch1 * float(rng.uniform(0.15, 0.30)) / NCHAN
    return Setup(fch1, foff, float(rng.uniform(0.3e-3, 1.5e-3)))


def random_burst(rng: np.random.Generator, setup: Setup, dm: float, sample: float) -> BurstSpec:
    """A burst arriving (top of band) at ``sample`` with DM ``dm`` and random shape / S/N."""
    ts = setup.tsamp
    lo, hi = BURST_RANGES["width_samples"]
    width = float(np.exp(rng.uniform(np.log(lo), np.log(hi)))) * ts
    scat = 0.0 if rng.random() < 0.5 else float(rng.uniform(*BURST_RANGES["scattering_samples"]))
    band = {}
    if rng.random() < 0.4:  # band-limited: a Gaussian envelope somewhere in the band
        f = setup.freqs
        band = {
            "band_centre_mhz": float(rng.uniform(f.min(), f.max())),
            "band_fwhm_mhz": float(rng.uniform(0.2, 1.0) * np.ptp(f)),
        }
    return BurstSpec(
        t_s=float(sample) * ts,
        dm=float(dm),
        snr=float(min(6.0 + rng.exponential(7.0), BURST_RANGES["snr"][1])),
        width_s=width,
        scattering_s=scat * ts,
        spectral_index=float(rng.uniform(*BURST_RANGES["spectral_index"])),
        **band,
    )


def random_rfi(rng: np.random.Generator, kind: str, duration_s: float) -> RFISpec:
    """One RFI specification of ``kind`` with random count and strength (noise sigma)."""
    if kind == "persistent":
        return RFISpec(kind=kind, count=int(rng.integers(1, 4)), strength=rng.uniform(2, 20))
    if kind == "impulsive":
        width = float(rng.uniform(0.5e-3, 5e-3))
        return RFISpec(kind=kind, count=int(rng.integers(1, 4)), strength=rng.uniform(1, 8),
                       width_s=width)  # fmt: skip
    return RFISpec(kind=kind, count=1, strength=rng.uniform(3, 12),
                   width_s=float(rng.uniform(0.1, 0.9) * duration_s))  # fmt: skip


def simulate(
    rng: np.random.Generator,
    setup: Setup,
    nsamp: int,
    bursts: tuple[BurstSpec, ...] = (),
    rfi: tuple[RFISpec, ...] = (),
) -> tuple[np.ndarray, Simulation]:
    """Simulate ``nsamp`` samples and clean them as the search does: ``[nchan, nsamp]``."""

    config = SimulationConfig(
        nchans=setup.nchans,
        fch1=setup.fch1,
        foff=setup.foff,
        tsamp=setup.tsamp,
        nbits=32,
        nsamples=int(nsamp),
        bursts=bursts,
        rfi=rfi,
        seed=int(rng.integers(0, 2**31)),
    )
    sim = Simulation(config)
    clean, _ = preprocess_block(np.ascontiguousarray(sim.block(0, int(nsamp)).T))
    return clean, sim


def dm_index(dms: np.ndarray, dm: float) -> float:
    """Fractional index of ``dm`` in the increasing DM trials ``dms``."""
    return float(np.interp(dm, dms, np.arange(dms.size)))


# -- detector examples ----------------------------------------------------------------------
@dataclass(frozen=True)
class DetectorBlock:
    """A simulated, cleaned block ``[nchan, nsamp]`` and its DM-time ``[ndm, columns]``."""

    setup: Setup
    data: np.ndarray
    dm_time: np.ndarray
    dms: np.ndarray
    bursts: tuple[BurstSpec, ...]
    rfi: tuple[str, ...]

    def sample(self, burst: BurstSpec) -> float:
        """Column of ``burst`` (arrival at the top of the band) in ``dm_time``."""
        return burst.t_s / self.setup.tsamp


def random_dms(rng: np.random.Generator, setup: Setup) -> np.ndarray:
    """DM trials from 0 to 150-1200 pc cm^-3: the tolerance rule (as the search plans them)
    or, for half the blocks, 48-256 uniform steps."""
    dm_max = float(rng.uniform(150.0, 1200.0))
    if rng.random() < 0.5:
        return np.linspace(0.0, dm_max, int(rng.integers(48, 257)))
    return tolerance_dm_trials(
        0.0, dm_max, tsamp=setup.tsamp, fch1=setup.fch1, foff=setup.foff, nchans=setup.nchans
    )


def detector_example(
    rng: np.random.Generator,
    *,
    n_bursts: int | None = None,
    rfi: tuple[str, ...] | None = None,
    columns: int = DETECTOR_COLUMNS,
    snr: float | None = None,
    tail: int = 0,
    **burst_fields: float,
) -> DetectorBlock:
    """One simulated block and its DM-time image.

    ``n_bursts``/``rfi`` default to a random mix: 0-2 bursts and, independently, each RFI
    kind with probability 1/4. ``snr`` fixes the bursts' S/N and ``burst_fields`` any other
    :class:`BurstSpec` field (e.g. ``width_s``); ``tail`` adds raw samples after the block
    (room for cutouts).
    """
    setup = random_setup(rng)
    dms = random_dms(rng, setup)
    delays = delay_table(dms, setup.freqs, setup.tsamp)
    nsamp = columns + int(delays.max()) + tail
    if n_bursts is None:
        n_bursts = int(rng.choice([0, 1, 1, 1, 2]))
    if rfi is None:
        rfi = tuple(k for k in RFI_KINDS if rng.random() < 0.25)
    lo, hi = BURST_RANGES["dm_fraction"]
    bursts = tuple(
        random_burst(rng, setup, rng.uniform(lo, hi) * dms[-1], rng.uniform(6, columns - 6))
        for _ in range(n_bursts)
    )
    if snr is not None:
        burst_fields["snr"] = float(snr)
    bursts = tuple(dataclasses.replace(b, **burst_fields) for b in bursts)
    specs = tuple(random_rfi(rng, k, nsamp * setup.tsamp) for k in rfi)
    data, _ = simulate(rng, setup, nsamp, bursts, specs)
    dm_time = dedisperse_reference(data, delays)[:, :columns]
    return DetectorBlock(setup, data, dm_time, dms, bursts, tuple(rfi))


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
            np.array([block.sample(b) for b in block.bursts]),
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
    "persistent": 0.12,
    "impulsive": 0.12,
    "drifting": 0.12,
}


@dataclass(frozen=True)
class Candidate:
    """Where a search would put a candidate: DM (pc cm^-3), top-of-band sample, width."""

    dm: float
    sample: int
    width_samples: int


def search_candidate(rng: np.random.Generator, burst: BurstSpec, tsamp: float) -> Candidate:
    """A candidate as a search reports the burst: DM and time jittered, width rounded."""
    width = max(burst.width_s + burst.scattering_s, tsamp) / tsamp
    width = width * 2.0 ** rng.uniform(-1.0, 1.0)
    if rng.random() < 0.25:
        width = float(rng.integers(1, 3))
    sample = round(burst.t_s / tsamp + rng.normal(0.0, 0.3 * width + 0.5))
    dm = max(burst.dm * (1.0 + rng.normal(0.0, 0.01)) + rng.normal(0.0, 1.0), 0.0)
    return Candidate(dm, int(sample), max(1, round(width)))


def cutout_pair(data: np.ndarray, setup: Setup, cand: Candidate) -> tuple[np.ndarray, np.ndarray]:
    """FETCH-style freq-time ``[256 time, 256 freq]`` and DM-time ``[256, 256]`` cutouts."""

    args = (data, setup.freqs, setup.tsamp, cand.dm, cand.sample, cand.width_samples)
    return freq_time_cutout(*args), dm_time_cutout(*args)


def classifier_example(
    rng: np.random.Generator, kind: str, snr: float | None = None
) -> tuple[np.ndarray, np.ndarray, Candidate, BurstSpec | None]:
    """One candidate's cutouts of ``kind`` (a key of :data:`CLASSIFIER_MIX`).

    Returns (freq-time, DM-time, candidate, burst or None). ``snr`` fixes a burst's S/N.
    RFI candidates sit where a search triggers on them (impulses: their time and a DM
    of 0-150; drifting signals: a time inside the sweep); noise and persistent RFI
    candidates are placed at random.
    """

    setup = random_setup(rng)
    ts = setup.tsamp
    if kind == "burst":
        dm = rng.uniform(*BURST_RANGES["dm"])
        width = 1
    else:
        dm = rng.uniform(0.0, 150.0) if kind == "impulsive" else rng.uniform(0.0, 1000.0)
        width = int(2 ** rng.integers(0, 5))
    start, stop = cutout_span(setup.freqs, ts, dm, 0, 64)  # room for the widest cutout
    nsamp, centre = stop - start, -start
    burst, specs = None, ()
    if kind == "burst":
        burst = random_burst(rng, setup, dm, centre)
        if snr is not None:
            burst = dataclasses.replace(burst, snr=float(snr))
        cand = search_candidate(rng, burst, ts)
    elif kind == "noise":
        cand = Candidate(dm, centre, width)
    else:
        specs = (random_rfi(rng, kind, nsamp * ts),)
        cand = Candidate(dm, centre, width)
    data, sim = simulate(rng, setup, nsamp, () if burst is None else (burst,), specs)
    if kind in ("impulsive", "drifting"):
        cand = Candidate(dm, _rfi_sample(rng, sim, ts), width)
    ft, dt = cutout_pair(data, setup, cand)
    return ft, dt, cand, burst


def _rfi_sample(rng: np.random.Generator, sim: Simulation, tsamp: float) -> int:
    """A sample where a search would trigger on the simulated RFI event."""
    event = sim.rfi[int(rng.integers(0, len(sim.rfi)))]
    truth = event.truth()
    t = float(truth["tcand_s"]) + rng.uniform(0.0, float(truth.get("duration_s", 0.0)))
    return round(t / tsamp) + int(rng.integers(-3, 4))


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
