"""Stream an observation through a dedisperser, block by block, into a DM–time file.

Blocks overlap by the plan's maximum delay, so each block yields exactly the output
samples it owns and the concatenation equals one-shot dedispersion of the whole file.
Output sample ``t`` is the pulse arrival time at the top of the band, ``t * tsamp`` seconds
after the first sample of the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np

from drafts_ops.core.atomic import atomic_path
from drafts_ops.core.errors import OperatorError, ParameterError
from drafts_ops.dedisp.modes import MODES, Algorithm, Backend, Mode
from drafts_ops.dedisp.operator import dedisperse, stream_dedisperse
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.io.reader import ObservationReader

#: DM–time output formats, by file suffix.
OUTPUT_SUFFIXES: tuple[str, ...] = (".npy", ".h5")


def dedisperse_block(
    data: np.ndarray,
    plan: DMPlan,
    mode: Mode = "prototype",
    backend: Backend = "cpu",
    algorithm: Algorithm = "brute",
) -> np.ndarray:
    """Dedisperse one block ``[nchan, nsamp]`` to ``[ndm, nsamp - max_delay]`` float32.

    Goes through the operator registry (:func:`drafts_ops.dedisp.dedisperse`), which holds
    both the direct-launched prototype kernel and the production operators.
    """
    if mode not in MODES:
        raise OperatorError(f"unknown dedispersion mode {mode!r}; choose one of {', '.join(MODES)}")

    return dedisperse(data, plan, mode=mode, algorithm=algorithm, backend=backend)  # type: ignore[arg-type]


def iter_dedispersed(
    reader: ObservationReader,
    plan: DMPlan,
    block_size: int,
    *,
    mode: Mode = "prototype",
    backend: Backend = "cpu",
    algorithm: Algorithm = "brute",
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(first output sample, dmt block [ndm, n])`` tiling the whole observation.

    Production mode goes through the operator's batched stream
    (:func:`drafts_ops.dedisp.operator.stream_dedisperse`), two blocks per kernel call.
    """
    h = reader.header
    if plan.nchan != h.nchans or not np.allclose(plan.freqs, h.chan_freqs):
        raise ParameterError(f"{reader.path}: DM plan channels do not match the file's")
    if h.nsamples <= plan.max_delay:
        raise ParameterError(
            f"{reader.path}: {h.nsamples} samples is not more than the maximum dispersion "
            f"delay {plan.max_delay} samples (DM {plan.dms[-1]:g}); lower --dm-max"
        )
    if mode == "production":
        yield from stream_dedisperse(
            reader, plan, block_nsamp=block_size, algorithm=algorithm, backend=backend
        )
        return
    if algorithm != "brute":
        raise OperatorError(f"the prototype is brute force only, not {algorithm!r}")
    for start, block in reader.iter_blocks(block_size, plan.max_delay, raw=True):
        if block.shape[1] > plan.max_delay:
            yield start, dedisperse_block(block, plan, mode, backend)


def output_samples(reader: ObservationReader, plan: DMPlan) -> int:
    """Number of DM–time samples a whole observation yields."""
    return plan.output_length(reader.header.nsamples)


def dedisperse_file(
    reader: ObservationReader,
    plan: DMPlan,
    out_path: str | Path,
    *,
    block_size: int = 8192,
    mode: Mode = "prototype",
    backend: Backend = "cpu",
    algorithm: Algorithm = "brute",
) -> Path:
    """Dedisperse ``reader`` into ``out_path`` (``.npy`` array or ``.h5`` with metadata).

    The ``.npy`` file holds ``[ndm, nout]`` float32; the ``.h5`` file holds datasets
    ``dmt`` (the same array) and ``dms`` (pc cm^-3) with attributes ``tsamp`` (s),
    ``f_ref_mhz``, ``nchans``, ``fch1``, ``foff``, ``mode`` and ``source``. Writes are
    atomic: nothing appears under ``out_path`` unless the whole file was processed.
    """
    out_path = Path(out_path)
    suffix = out_path.suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise ParameterError(f"{out_path}: output must end in {' or '.join(OUTPUT_SUFFIXES)}")
    shape = (plan.ndm, output_samples(reader, plan))
    blocks = iter_dedispersed(
        reader, plan, block_size, mode=mode, backend=backend, algorithm=algorithm
    )
    with atomic_path(out_path) as tmp:
        if suffix == ".npy":
            dmt = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=shape)
            _fill(dmt, blocks)
            dmt.flush()
            del dmt
        else:
            with h5py.File(tmp, "w") as fh:
                _fill(fh.create_dataset("dmt", shape=shape, dtype=np.float32), blocks)
                fh.create_dataset("dms", data=plan.dms)
                h = reader.header
                fh.attrs.update(
                    tsamp=h.tsamp,
                    f_ref_mhz=plan.f_ref,
                    nchans=h.nchans,
                    fch1=h.fch1,
                    foff=h.foff,
                    mode=mode,
                    algorithm=algorithm,
                    source=str(reader.path),
                )
    return out_path


def _fill(target, blocks: Iterator[tuple[int, np.ndarray]]) -> None:
    written = 0
    for start, dmt in blocks:
        if start != written:
            raise OperatorError(f"stream gap: block at sample {start}, expected {written}")
        target[:, start : start + dmt.shape[1]] = dmt
        written += dmt.shape[1]
    if written != target.shape[1]:
        raise OperatorError(f"stream wrote {written} of {target.shape[1]} samples")
