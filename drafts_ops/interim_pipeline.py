"""Interim search stages used by the flows until ``drafts_ops.pipeline`` lands.

A minimal, correct single-pulse search with the stage functions the flows call:
:class:`SearchConfig`, :func:`plan_search`, :func:`process_block`,
:func:`merge_block_results`, :func:`classify_candidates`, :func:`write_outputs`. It
dedisperses with the numpy reference and runs a boxcar matched filter; it is replaced by the
detection package's pipeline and then removed.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from drafts_ops.atomic import atomic_path, write_text_atomic
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.dedisp.reference import dedisperse_reference
from drafts_ops.errors import ObservationError, ParameterError
from drafts_ops.io import open_observation
from drafts_ops.io.header import Header

PathLike = str | os.PathLike[str]
_WIDTHS = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class SearchConfig:
    """Search parameters (DM in pc cm^-3, block size in samples)."""

    dm_min: float = 0.0
    dm_max: float = 1000.0
    dm_step: float | None = None
    dm_tol: float = 1.25
    dedisp_mode: Literal["prototype", "production"] = "production"
    algorithm: str = "brute"
    detector: Literal["classical", "ml", "both"] = "classical"
    block_size: int = 16384
    snr_threshold: float = 7.0


@dataclass(frozen=True)
class SearchPlan:
    """What to search: header, DM trials, blocks ``(start, nsamp)`` and their overlap."""

    path: str
    config: SearchConfig
    header: Header
    dms: tuple[float, ...]
    blocks: tuple[tuple[int, int], ...]
    overlap: int

    @property
    def dm_plan(self) -> DMPlan:
        return DMPlan.build(np.asarray(self.dms), self.header.chan_freqs, self.header.tsamp)


@dataclass(frozen=True)
class Candidate:
    """One candidate: time at the top of the band (s), DM, S/N, width (s and samples)."""

    tcand_s: float
    dm: float
    snr: float
    width_s: float
    width_samples: int


def plan_search(path: PathLike, config: SearchConfig) -> SearchPlan:
    """Open ``path``, choose DM trials and split the file into blocks."""
    if config.block_size <= 0:
        raise ParameterError(f"block size {config.block_size} must be positive")
    with open_observation(path) as reader:
        header = reader.header
    plan = DMPlan.from_header(
        header, config.dm_min, config.dm_max, config.dm_step, dm_tol=config.dm_tol
    )
    if header.nsamples <= plan.max_delay:
        raise ObservationError(path, f"shorter than the DM sweep ({plan.max_delay} samples)")
    blocks = []
    start = 0
    while start < header.nsamples - plan.max_delay:
        blocks.append((start, min(config.block_size, header.nsamples - plan.max_delay - start)))
        start += config.block_size
    return SearchPlan(str(path), config, header, tuple(plan.dms), tuple(blocks), plan.max_delay)


def process_block(path: PathLike, plan: SearchPlan, block_index: int, work_dir: PathLike) -> Path:
    """Dedisperse and search one block; write its candidates to ``work_dir`` (``.npy``)."""
    start, nsamp = plan.blocks[block_index]
    with open_observation(path) as reader:
        data = reader.read_block(start, nsamp + plan.overlap)
    dm_plan = plan.dm_plan
    data = data - np.median(data, axis=1, keepdims=True)
    dmt = dedisperse_reference(data, dm_plan.delays)
    rows = []
    for width in _WIDTHS:
        kernel = np.ones(width) / np.sqrt(width)
        for d, series in enumerate(dmt):
            med = np.median(series)
            sigma = 1.4826 * np.median(np.abs(series - med)) or 1.0
            snr = np.convolve((series - med) / sigma, kernel, mode="same")
            for t in np.flatnonzero(snr >= plan.config.snr_threshold):
                rows.append((start + t, plan.dms[d], snr[t], width))
    out = Path(work_dir) / f"block_{block_index:05d}.npy"
    with atomic_path(out) as tmp, tmp.open("wb") as fh:
        np.save(fh, np.asarray(rows, dtype=np.float64).reshape(-1, 4))
    return out


def merge_block_results(paths: list[Path], plan: SearchPlan) -> list[Candidate]:
    """Cluster all blocks' detections: one candidate per burst (within 16 samples)."""
    rows = np.concatenate([np.load(p) for p in paths]) if paths else np.zeros((0, 4))
    rows = rows[np.argsort(-rows[:, 2])] if rows.size else rows
    kept: list[np.ndarray] = []
    for row in rows:
        if all(abs(row[0] - k[0]) > 16 for k in kept):
            kept.append(row)
    tsamp = plan.header.tsamp
    cands = [
        Candidate(r[0] * tsamp, float(r[1]), float(r[2]), r[3] * tsamp, int(r[3])) for r in kept
    ]
    return sorted(cands, key=lambda c: c.tcand_s)


def classify_candidates(
    candidates: list[Candidate], path: PathLike, plan: SearchPlan
) -> list[Candidate]:
    """Keep every candidate (the interim pipeline has no classifier)."""
    return list(candidates)


def write_outputs(
    candidates: list[Candidate], path: PathLike, plan: SearchPlan, out_dir: PathLike
) -> dict[str, Path]:
    """Write ``candidates.csv`` atomically."""
    buffer = io.StringIO()
    fields = list(Candidate.__dataclass_fields__)
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(asdict(c) for c in candidates)
    return {
        "candidates_csv": write_text_atomic(Path(out_dir) / "candidates.csv", buffer.getvalue())
    }
