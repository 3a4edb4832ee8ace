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
