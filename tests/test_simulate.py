"""Simulated observations: determinism, files, truth, quantisation, RFI, bad parameters."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from drafts_ops.core.errors import ParameterError
from drafts_ops.io import open_observation
from drafts_ops.simulate import (
    TRUTH_COLUMNS,
    BurstSpec,
    RFISpec,
    Simulation,
    SimulationConfig,
    bandpass_gain,
    demo_config,
    random_bursts,
    read_truth,
    simulate_array,
    truth_path,
    write_simulation,
)

SMALL = SimulationConfig(
    nchans=64,
    fch1=1500.0,
    foff=-4.6875,
    tsamp=1e-3,
    duration_s=1.5,
    seed=5,
    bursts=[BurstSpec(t_s=0.3, dm=200.0, snr=30.0, width_s=2e-3)],
    rfi=[RFISpec(kind=k) for k in ("persistent", "impulsive", "drifting")],
)


def test_same_seed_same_data_other_seed_other_data():
    h1, a, bursts = simulate_array(SMALL)
    _, b, _ = simulate_array(SMALL)
    _, c, _ = simulate_array(dataclasses.replace(SMALL, seed=6))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.dtype == np.float32 and a.shape == (64, 1500) == (h1.nchans, h1.nsamples)
    assert bursts == list(SMALL.bursts)


def test_blocks_do_not_depend_on_the_block_size():
    sim = Simulation(SMALL)
    whole = sim.block(0, 1500)
    pieces = np.concatenate([b for _, b in sim.blocks(block_samples=333)])
    np.testing.assert_array_equal(pieces, whole)


def test_written_file_reads_back_as_the_array(tmp_path):
    out = write_simulation(tmp_path / "sim.fil", SMALL)
    _, data, _ = simulate_array(SMALL)
    with open_observation(out) as reader:
        assert reader.header == SMALL.header()
        np.testing.assert_array_equal(reader.read_all(), data)
    assert truth_path(out) == tmp_path / "sim.truth.csv"
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind


def test_truth_table(tmp_path):
    write_simulation(tmp_path / "sim.fil", SMALL)
    text = (tmp_path / "sim.truth.csv").read_text()
    assert text.splitlines()[0].split(",") == list(TRUTH_COLUMNS)
    rows = read_truth(tmp_path / "sim.truth.csv")
    assert [r["kind"] for r in rows] == [
        "burst",
        "rfi_persistent",
        "rfi_impulsive",
        "rfi_drifting",
    ]
    burst = rows[0]
    assert (burst["tcand_s"], burst["dm"], burst["width_s"], burst["snr"]) == (
        0.3,
        200.0,
        2e-3,
        30.0,
    )
    assert burst["scattering_s"] == 0.0 and burst["band_centre_mhz"] is None
    assert rows[1]["snr"] is None and rows[1]["freq_lo_mhz"] == rows[1]["freq_hi_mhz"]
    assert rows[2]["dm"] == 0.0 and rows[2]["snr"] > 10


@pytest.mark.parametrize("nbits", [1, 2, 4, 8, 16, 32])
def test_quantisation_per_nbits(nbits, tmp_path):
    config = dataclasses.replace(SMALL, nbits=nbits, bandpass="flat", bursts=(), rfi=())
    _, data, _ = simulate_array(config)
    mean, sigma = {1: (0.5, 0.5), 2: (1.5, 1), 4: (7.5, 2.5), 8: (128, 16)}.get(
        nbits, (32768, 2048) if nbits == 16 else (128, 16)
    )
    if nbits == 32:
        assert not np.all(data == np.rint(data))
        assert data.mean() == pytest.approx(mean, abs=0.1)
        assert data.std() == pytest.approx(sigma, rel=0.01)
    else:
        top = (1 << nbits) - 1
        np.testing.assert_array_equal(data, np.rint(data))
        assert data.min() >= 0 and data.max() <= top
        assert len(np.unique(data)) == min(top + 1, len(np.unique(data)))
    if nbits >= 4:
        assert data.mean() == pytest.approx(mean, abs=0.02 * sigma)
        assert data.std() == pytest.approx(sigma, rel=0.02)
    out = write_simulation(tmp_path / "q.fil", config)
    with open_observation(out) as reader:
        np.testing.assert_array_equal(reader.read_all(), data)


def test_bandpass_in_the_data():
    config = dataclasses.replace(SMALL, bursts=(), rfi=(), duration_s=4.0)
    h, data, _ = simulate_array(config)
    gain = bandpass_gain(h.chan_freqs, "smooth")
    np.testing.assert_allclose(data.mean(axis=1), 128 * gain, atol=1.0)
    np.testing.assert_allclose(data.std(axis=1), 16 * gain, rtol=0.05)


def test_each_rfi_kind_is_where_the_truth_says(tmp_path):
    config = dataclasses.replace(
        SMALL,
        bursts=(),
        bandpass="flat",
        rfi=(
            RFISpec(kind="persistent", count=3, strength=3.0),
            RFISpec(kind="impulsive", count=2, strength=8.0, width_s=3e-3),
            RFISpec(kind="drifting", count=1, strength=6.0, width_s=0.6),
        ),
    )
    out = write_simulation(tmp_path / "rfi.fil", config)
    rows = read_truth(truth_path(out))
    h, data, _ = simulate_array(config)
    z = (data - 128.0) / 16.0
    freqs = h.chan_freqs
    persistent = [r for r in rows if r["kind"] == "rfi_persistent"]
    assert len(persistent) == 3
    chans = {int(np.argmin(np.abs(freqs - r["freq_lo_mhz"]))) for r in persistent}
    assert len(chans) == 3
    (drift,) = [r for r in rows if r["kind"] == "rfi_drifting"]
    k0 = round(drift["tcand_s"] / h.tsamp)
    k1 = round((drift["tcand_s"] + drift["duration_s"]) / h.tsamp)
    inside = (freqs >= drift["freq_lo_mhz"] - 5) & (freqs <= drift["freq_hi_mhz"] + 5)
    steady = np.isin(np.arange(h.nchans), list(chans), invert=True)
    level = z.mean(axis=1)
    assert all(level[c] > 1.2 for c in chans)  # strength 3 times a modulation in 0.2..1.8
    assert np.all(np.abs(level[steady & ~inside]) < 0.3)
    clean = z[steady]
    for row in (r for r in rows if r["kind"] == "rfi_impulsive"):
        k = round(row["tcand_s"] / h.tsamp)
        series = clean.sum(axis=0) / np.sqrt(clean.shape[0])
        assert series[k] > 20 and abs(int(np.argmax(series[k - 5 : k + 6])) - 5) <= 1
    assert z[steady & inside, k0:k1].max(axis=0).mean() > 4.0
    assert z[steady & ~inside, k0:k1].mean() == pytest.approx(0.0, abs=0.05)


def test_rfi_positions_depend_on_the_seed_only():
    a = Simulation(SMALL).truth_rows()
    b = Simulation(SMALL).truth_rows()
    c = Simulation(dataclasses.replace(SMALL, seed=99)).truth_rows()
    assert a == b and a != c


def test_demo_config_is_small_and_valid():
    config = demo_config()
    header = config.header()
    assert header.nchans * header.nsamples * header.nbits / 8 <= 5e6
    assert len(config.bursts) >= 3
    assert all(10 <= b.snr <= 30 and 100 <= b.dm <= 800 for b in config.bursts)
    assert {s.kind for s in config.rfi} == {"persistent", "impulsive", "drifting"}


def test_random_bursts_fit_and_are_seeded(rng):
    header = SMALL.header()
    bursts = random_bursts(20, header, rng, dm_range=(10, 100), snr_range=(8, 9))
    assert len(bursts) == 20
    assert all(10 <= b.dm <= 100 and 8 <= b.snr <= 9 and 0 <= b.t_s < header.tobs for b in bursts)
    again = random_bursts(
        20, header, np.random.default_rng(20261129), dm_range=(10, 100), snr_range=(8, 9)
    )
    assert again == bursts


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"nchans": 0}, "nchans"),
        ({"tsamp": -1e-3}, "tsamp"),
        ({"nbits": 3}, "nbits = 3"),
        ({"foff": 0.0}, "foff"),
        ({"fch1": 100.0, "foff": -2.0}, "frequencies must stay positive"),
        ({"duration_s": 0.0}, "duration"),
        ({"nsamples": -5}, "nsamples"),
        ({"bandpass": "wavy"}, "bandpass"),
        ({"seed": -1}, "seed"),
        ({"nchans": 3, "nbits": 1}, "whole bytes"),
        ({"bursts": (BurstSpec(t_s=5.0, dm=10, snr=10),)}, "beyond the end"),
        ({"bursts": ("not a burst",)}, "BurstSpec"),
        (
            {"bursts": (BurstSpec(t_s=0.1, dm=10, snr=10, band_centre_mhz=500, band_fwhm_mhz=20),)},
            "outside the band",
        ),
    ],
)
def test_bad_configuration_is_a_parameter_error(change, message):
    with pytest.raises(ParameterError, match=message):
        dataclasses.replace(SMALL, **change)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dm": -1.0}, "dm = -1.0"),
        ({"snr": 0.0}, "snr = 0.0 must be positive"),
        ({"width_s": -1e-3}, "width_s"),
        ({"scattering_s": -1.0}, "scattering_s"),
        ({"t_s": -0.5}, "t_s"),
        ({"dm": float("nan")}, "finite"),
        ({"band_centre_mhz": 1300.0}, "go together"),
        ({"band_centre_mhz": 1300.0, "band_fwhm_mhz": 0.0}, "band_fwhm_mhz"),
    ],
)
def test_bad_burst_is_a_parameter_error(kwargs, message):
    values = {"t_s": 0.1, "dm": 100.0, "snr": 10.0} | kwargs
    with pytest.raises(ParameterError, match=message):
        BurstSpec(**values)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "lightning"}, "unknown RFI kind"),
        ({"kind": "impulsive", "count": -1}, "count"),
        ({"kind": "impulsive", "strength": 0.0}, "strength"),
        ({"kind": "drifting", "width_s": -1.0}, "width_s"),
    ],
)
def test_bad_rfi_is_a_parameter_error(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        RFISpec(**kwargs)


def test_too_many_persistent_channels():
    config = dataclasses.replace(SMALL, rfi=(RFISpec(kind="persistent", count=65),))
    with pytest.raises(ParameterError, match="65 persistent RFI channels"):
        Simulation(config)


def test_quantise_passes_ready_samples_through():
    """write_sigproc streams simulator blocks without rounding copies (bits.quantise)."""
    from drafts_ops.io.bits import quantise

    block = np.arange(256, dtype=np.uint8).reshape(16, 16)
    assert quantise(block, 8) is block
    np.testing.assert_array_equal(quantise(block, 2), np.minimum(block, 3))
    np.testing.assert_array_equal(quantise(np.array([-0.6, 2.5, 300.0]), 8), [0, 2, 255])
