"""Candidate PNGs a person can judge a faint burst by: what the plotter puts on the page
(sub-bands, smoothing to the width, sigma units, the marker beside the peak)."""

from __future__ import annotations

import numpy as np
import pytest

from drafts_ops.detect.plots import CandidatePlotter, display_images, subband_count
from drafts_ops.search import SearchConfig, run_search
from drafts_ops.search.stages import load_cutouts
from drafts_ops.simulate import BurstSpec, SimulationConfig, write_simulation


def test_faint_bursts_get_few_wide_subbands_and_bright_ones_many():
    assert subband_count(8.0, 256) == 4  # (8 / 3)^2 = 7 -> 4 sub-bands of S/N 4 each
    assert subband_count(20.0, 256) == 32
    assert subband_count(100.0, 256) == 64
    assert subband_count(8.0, 336) == 4 and subband_count(20.0, 336) == 16  # divides 336


@pytest.fixture(scope="module")
def faint(tmp_path_factory):
    """An S/N-8 burst found by the search: its candidate and its cutouts."""
    tmp = tmp_path_factory.mktemp("faint")
    band = {"nchans": 256, "fch1": 1499.4140625, "foff": -1.171875, "tsamp": 512e-6}
    burst = BurstSpec(t_s=3.0, dm=300.0, snr=8.0, width_s=2e-3)
    config = SimulationConfig(**band, duration_s=6.0, seed=5, bursts=(burst,))
    path = write_simulation(tmp / "faint.fil", config)
    cfg = SearchConfig(dm_max=600.0, snr_threshold=6.0, write_h5=False, write_plots=False)
    result = run_search(path, tmp / "out", cfg, keep_intermediates=True)
    near = [i for i, c in enumerate(result.candidates) if abs(c.tcand_s - 3.0) < 0.02]
    assert near, "the search found the faint burst"
    ft, dt = load_cutouts(tmp / "out" / "work" / "cutouts.npz")
    return result.candidates[near[0]], ft[near[0]], dt[near[0]], band["tsamp"]


def _stands_out(image: np.ndarray, centre: int, half: int = 3) -> float:
    """Peak within ``half`` columns of ``centre`` over the noise of the other columns."""
    on = image[..., centre - half : centre + half + 1]
    off = np.delete(image, np.s_[centre - 3 * half : centre + 3 * half + 1], axis=-1)
    return float((on.max() - np.median(off)) / off.std())


def test_an_snr_8_burst_stands_out_in_the_plotted_waterfall(faint, tmp_path):
    cand, ft, dt, tsamp = faint
    with CandidatePlotter(tsamp=tsamp, fmax_mhz=1499.4, fmin_mhz=1200.0) as plotter:
        plotter.plot(cand, ft, dt, tmp_path / "faint.png")
        plotted = np.asarray(plotter.waterfall.get_array())
        dm_plotted = np.asarray(plotter.dm_image.get_array())
        profile = plotter.profile.get_ydata()
        ticks = plotter.marker.get_xdata()
    centre = ft.shape[0] // 2
    assert plotted.shape[0] == 4  # sub-bands, not 256 channels
    assert _stands_out(plotted, centre) > 3.0
    assert _stands_out(dm_plotted, centre) > 3.0
    assert max(profile[centre - 3 : centre + 4]) > 5.0  # the profile is in S/N units
    assert _stands_out(ft.T, centre) < _stands_out(plotted, centre)  # the raw image shows less
    assert min(abs(t - cand.tcand_s) for t in ticks) > 0  # ticks beside the peak, not on it
    assert (tmp_path / "faint.png").read_bytes()[:4] == b"\x89PNG"


def test_display_images_leave_masked_channels_out():
    rng = np.random.default_rng(1)
    ft = rng.normal(size=(256, 64)).astype(np.float32)
    ft[:, :16] = 0.0  # a masked quarter of the band
    waterfall, profile, dm_image = display_images(ft, rng.normal(size=(64, 256)), snr=8.0,
                                                  width_pixels=2)  # fmt: skip
    assert np.isfinite(waterfall).all() and np.isfinite(profile).all()
    assert waterfall.shape == (4, 256) and dm_image.shape == (64, 256)
    assert np.std(profile) == pytest.approx(1.0, rel=0.2)  # S/N units: unit noise
