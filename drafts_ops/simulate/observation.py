"""Assemble a simulated observation block by block: noise, bursts, RFI; write it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

from drafts_ops.core.atomic import write_text_atomic
from drafts_ops.io.header import Header
from drafts_ops.io.sigproc import write_sigproc
from drafts_ops.simulate.burst import BurstSpec, RenderedBurst
from drafts_ops.simulate.config import SimulationConfig
from drafts_ops.simulate.noise import NoiseModel
from drafts_ops.simulate.rfi import RFIComponent, realise_rfi
from drafts_ops.simulate.truth import truth_path, write_truth

#: Bytes of samples generated per block when streaming.
BLOCK_BYTES = 32 << 20


class Simulation:
    """A configured observation, ready to generate any block on demand.

    Noise is counter-based, so blocks are identical whatever the block size and order.
    """

    def __init__(self, config: SimulationConfig) -> None:
        self.config = config
        self.header: Header = config.header()
        freqs = self.header.chan_freqs
        self.noise = NoiseModel.build(
            freqs, config.nbits, config.seed, config.bandpass, config.noise_level
        )
        chan_bw = abs(config.foff)
        self.bursts = [RenderedBurst.render(freqs, config.tsamp, b, chan_bw) for b in config.bursts]
        rfi_seed = config.seed if config.rfi_seed is None else config.rfi_seed
        rng = np.random.default_rng([rfi_seed, 1])
        self.rfi: list[RFIComponent] = []
        for spec in config.rfi:
            self.rfi.extend(realise_rfi(spec, freqs, config.tsamp, self.header.nsamples, rng))

    def block(self, start: int, nsamp: int) -> np.ndarray:
        """Samples ``[start, start + nsamp)`` in file layout ``[nsamp, nchans]``, file dtype."""
        nchan = self.header.nchans
        out = np.empty((nsamp, nchan), dtype=self.noise.dtype)
        self.noise.fill(out, start)
        parts = [c.entries(start, start + nsamp) for c in (*self.bursts, *self.rfi)]
        parts = [p for p in parts if p[0].size]
        if parts:
            samples = np.concatenate([p[0] for p in parts]).astype(np.int64)
            chans = np.concatenate([p[1] for p in parts]).astype(np.int64)
            values = np.concatenate([p[2] for p in parts]).astype(np.float64)
            index, inverse = np.unique(samples * nchan + chans, return_inverse=True)
            summed = np.bincount(inverse.reshape(-1), weights=values, minlength=index.size)
            self.noise.add(out, start, index // nchan, index % nchan, summed)
        return out

    def blocks(
        self, block_samples: int | None = None, *, prefetch: bool = False
    ) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, block [nsamp, nchans])`` covering the observation in order.

        ``prefetch`` computes the next block in a background thread while the caller
        consumes the current one (e.g. writes it), holding two blocks in memory.
        """
        if block_samples is None:
            row_bytes = self.header.nchans * self.noise.dtype.itemsize
            block_samples = max(1, BLOCK_BYTES // row_bytes)
        total = self.header.nsamples
        starts = range(0, total, block_samples)
        if not prefetch:
            for start in starts:
                yield start, self.block(start, min(block_samples, total - start))
            return
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = None
            for start in starts:
                future = pool.submit(self.block, start, min(block_samples, total - start))
                if pending is not None:
                    yield pending[0], pending[1].result()
                pending = (start, future)
            if pending is not None:
                yield pending[0], pending[1].result()

    def truth_rows(self) -> list[dict[str, object]]:
        """Truth table rows: bursts in configuration order, then RFI."""
        tsamp = self.header.tsamp
        rows: list[dict[str, object]] = []
        for r in self.bursts:
            b = r.spec
            rows.append(
                {
                    "kind": "burst",
                    "tcand_s": b.t_s,
                    "dm": b.dm,
                    "width_s": b.width_s,
                    "snr": b.snr,
                    "scattering_s": b.scattering_s,
                    "spectral_index": b.spectral_index,
                    "band_centre_mhz": b.band_centre_mhz,
                    "band_fwhm_mhz": b.band_fwhm_mhz,
                    "boxcar_width_s": r.boxcar_width * tsamp,
                    "peak_sigma": float(r.profile.max()),
                }
            )
        rows.extend(c.truth() for c in self.rfi)
        return rows


def simulate_array(config: SimulationConfig) -> tuple[Header, np.ndarray, list[BurstSpec]]:
    """Simulate a small observation in memory.

    Returns the header, the data as float32 ``[nchans, nsamples]`` — the *quantised*
    sample values, exactly what a reader returns for the file :func:`write_simulation`
    writes (use ``nbits=32`` for unquantised data) — and the injected bursts.
    """
    sim = Simulation(config)
    data = np.empty((sim.header.nchans, sim.header.nsamples), dtype=np.float32)
    for start, block in sim.blocks():
        data[:, start : start + block.shape[0]] = block.T
    return sim.header, data, list(config.bursts)


def write_simulation(
    out_path: str | Path, config: SimulationConfig, *, progress: bool = False
) -> Path:
    """Stream a simulated observation to a SIGPROC file and write ``OUT.truth.csv``.

    Memory is bounded by two blocks (:data:`BLOCK_BYTES` each: the next one is generated
    while the current one is written). Both files are written atomically. ``progress``
    shows a tqdm bar on stderr. Returns ``out_path``.
    """
    out_path = Path(out_path)
    sim = Simulation(config)

    def stream() -> Iterator[np.ndarray]:

        with tqdm(
            total=sim.header.nsamples,
            unit="spectra",
            unit_scale=True,
            disable=not progress,
            desc=out_path.name,
        ) as bar:
            for _, block in sim.blocks(prefetch=True):
                yield block.T
                bar.update(block.shape[0])

    write_sigproc(out_path, sim.header, stream())
    write_truth(truth_path(out_path), sim.truth_rows())
    return out_path


def write_multibeam(
    out_dir: str | Path,
    base: SimulationConfig,
    layout,
    sources: list[tuple[BurstSpec, float, float]],
    *,
    fwhm: float = 1.0,
    stem: str = "sim",
) -> dict[int, Path]:
    """One file per beam of ``layout`` (``<stem>_M<bb>_0001.fil`` and truth tables).

    Each beam has its own noise (seed ``base.seed + beam``) and the same RFI (the RFI
    positions follow ``base.seed`` in every beam, as terrestrial RFI enters every beam);
    each source ``(burst, x, y)`` at sky position ``(x, y)`` (units of the beam spacing)
    appears in beam ``b`` with S/N ``burst.snr * layout.response(b, x, y, fwhm)`` where
    that is at least 1 (Gaussian beams; ``fwhm = 1``: a source halfway between two beams
    is at half power in both). ``OUT/<stem>.beams.json`` lists the sources and their S/N
    in every beam.
    """

    out = Path(out_dir)
    files: dict[int, Path] = {}
    truth = []
    for spec, x, y in sources:
        gains = {b: layout.response(b, x, y, fwhm) for b in layout.beams}
        truth.append({**dataclasses.asdict(spec), "x": x, "y": y,
                      "snr_by_beam": {b: spec.snr * g for b, g in gains.items()
                                      if spec.snr * g >= 1.0}})  # fmt: skip
    for beam in layout.beams:
        bursts = [dataclasses.replace(spec, snr=spec.snr * layout.response(beam, x, y, fwhm))
                  for spec, x, y in sources]  # fmt: skip
        config = dataclasses.replace(
            base, seed=base.seed + beam, rfi_seed=base.seed, ibeam=beam,
            nbeams=len(layout.beams), bursts=tuple(b for b in bursts if b.snr >= 1.0),
        )  # fmt: skip
        files[beam] = write_simulation(out / f"{stem}_M{beam:02d}_0001.fil", config)
    write_text_atomic(out / f"{stem}.beams.json", json.dumps(truth, indent=2) + "\n")
    return files
