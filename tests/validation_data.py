"""A small simulated observation for the validation tests (with its truth table)."""

from __future__ import annotations

from pathlib import Path

#: The one injected burst: arrival (s), DM (pc cm^-3), target S/N, FWHM (s).
SIM_BURST = {"t_s": 1.2, "dm": 150.0, "snr": 25.0, "width_s": 2e-3}


def write_small_simulation(path: Path) -> Path:
    """64 channels of 4 MHz below 1500 MHz, 1 ms, 2.4 s, 8-bit, one burst (``SIM_BURST``)."""
    from drafts_ops.simulate import BurstSpec, SimulationConfig, write_simulation

    burst = BurstSpec(**SIM_BURST)
    config = SimulationConfig(nchans=64, fch1=1500.0, foff=-4.0, tsamp=1e-3, duration_s=2.4,
                              bandpass="flat", seed=7, bursts=(burst,))  # fmt: skip
    return write_simulation(path, config)
