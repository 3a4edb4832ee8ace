"""Synthetic observations: noise with a bandpass, dispersed bursts, RFI, truth tables.

Public API::

    BurstSpec, RFISpec, SimulationConfig, demo_config, random_bursts
    simulate_array(config) -> (Header, float32 [nchans, nsamples], list[BurstSpec])
    burst_signal(freqs_mhz, tsamp, burst, start_sample, nsamp) -> float32 [nchan, nsamp]
    write_simulation(out_path, config) -> Path   (plus OUT.truth.csv)
    read_truth(path), truth_path(observation), TRUTH_COLUMNS

The S/N convention is documented in :mod:`drafts_ops.simulate.burst`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below load with their module on first use
    from drafts_ops.simulate.burst import BurstSpec, RenderedBurst, burst_signal
    from drafts_ops.simulate.config import SimulationConfig, demo_config, random_bursts
    from drafts_ops.simulate.noise import NoiseModel, bandpass_gain
    from drafts_ops.simulate.observation import (
        Simulation,
        simulate_array,
        write_multibeam,
        write_simulation,
    )
    from drafts_ops.simulate.rfi import RFI_KINDS, RFISpec
    from drafts_ops.simulate.truth import TRUTH_COLUMNS, read_truth, truth_path

#: Where each public name lives. They load on first use, so that importing a light part of
#: the simulator (``simulate.bands``, ``simulate.truth``: the benchmark's and the command
#: line's) does not compile-load the renderer's Numba kernels (~0.2 s per command).
_HOMES = {
    "BurstSpec": "burst", "RenderedBurst": "burst", "burst_signal": "burst",
    "SimulationConfig": "config", "demo_config": "config", "random_bursts": "config",
    "NoiseModel": "noise", "bandpass_gain": "noise",
    "Simulation": "observation", "simulate_array": "observation",
    "write_multibeam": "observation", "write_simulation": "observation",
    "RFI_KINDS": "rfi", "RFISpec": "rfi",
    "TRUTH_COLUMNS": "truth", "read_truth": "truth", "truth_path": "truth",
}  # fmt: skip

__all__ = [
    "RFI_KINDS",
    "TRUTH_COLUMNS",
    "BurstSpec",
    "NoiseModel",
    "RFISpec",
    "RenderedBurst",
    "Simulation",
    "SimulationConfig",
    "bandpass_gain",
    "burst_signal",
    "demo_config",
    "random_bursts",
    "read_truth",
    "simulate_array",
    "truth_path",
    "write_multibeam",
    "write_simulation",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
