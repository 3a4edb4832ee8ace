"""Helpers shared by the reader/writer tests: headers, random samples, raw SIGPROC bytes."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from drafts_ops.io.header import Header


def make_header(
    nchans: int = 16, nbits: int = 8, nsamples: int = 0, *, descending: bool = True, **kw
) -> Header:
    """A small valid header; ``descending`` sets the sign of ``foff``."""
    values = {
        "nchans": nchans,
        "fch1": 1500.0 if descending else 1100.0,
        "foff": -0.5 if descending else 0.5,
        "tsamp": 0.000256,
        "nbits": nbits,
        "nsamples": nsamples,
        "tstart": 60000.25,
        "source_name": "FRB20240101",
        "src_raj": 53200.5,
        "src_dej": -281530.25,
        "telescope_id": 4,
    }
    values.update(kw)
    return Header(**values)


def random_samples(rng: np.random.Generator, shape: tuple[int, ...], nbits: int) -> np.ndarray:
    """Random values representable in ``nbits`` (float32 normal values for 32 bits)."""
    if nbits == 32:
        return rng.normal(10.0, 3.0, size=shape).astype(np.float32)
    return rng.integers(0, 1 << nbits, size=shape).astype(np.float32)


def sigproc_bytes(fields: list[tuple[str, str, object]], data: bytes = b"") -> bytes:
    """Raw SIGPROC bytes from ``(keyword, struct format or 's', value)`` triples."""

    def string(text: str) -> bytes:
        raw = text.encode("ascii")
        return struct.pack("<i", len(raw)) + raw

    out = [string("HEADER_START")]
    for name, fmt, value in fields:
        out.append(string(name))
        out.append(string(value) if fmt == "s" else struct.pack("<" + fmt, value))
    out.append(string("HEADER_END"))
    return b"".join(out) + data


def valid_fields(**changes: object) -> list[tuple[str, str, object]]:
    """Keyword triples of a small valid 8-bit, 8-channel filterbank (``None`` drops one)."""
    fields = {
        "source_name": ("s", "test"),
        "nchans": ("i", 8),
        "nbits": ("i", 8),
        "nifs": ("i", 1),
        "fch1": ("d", 1400.0),
        "foff": ("d", -1.0),
        "tsamp": ("d", 0.001),
        "tstart": ("d", 60000.0),
    }
    for name, value in changes.items():
        if value is None:
            fields.pop(name)
        else:
            fields[name] = (fields[name][0], value)
    return [(name, fmt, value) for name, (fmt, value) in fields.items()]


def write_bytes(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path
