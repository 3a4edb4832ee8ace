"""``drafts simulate``: options, the demo observation, errors."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from drafts_ops.cli import main
from drafts_ops.core.resources import resource_path
from drafts_ops.io import open_observation
from drafts_ops.simulate import read_truth


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_demo_regenerates_the_shipped_file_byte_for_byte(tmp_path):
    out = tmp_path / "demo.fil"
    assert main(["simulate", str(out), "--demo", "--quiet"]) == 0
    shipped = resource_path("data", "demo.fil")
    assert sha256(out) == sha256(shipped)
    assert (tmp_path / "demo.truth.csv").read_text() == resource_path(
        "data", "demo.truth.csv"
    ).read_text()


def test_shipped_demo_matches_its_truth():
    rows = read_truth(resource_path("data", "demo.truth.csv"))
    bursts = [r for r in rows if r["kind"] == "burst"]
    assert len(bursts) == 4 and {r["kind"] for r in rows} >= {
        "rfi_persistent",
        "rfi_impulsive",
        "rfi_drifting",
    }
    with open_observation(resource_path("data", "demo.fil")) as reader:
        h = reader.header
        assert (h.nchans, h.nbits, h.nsamples, h.tsamp) == (256, 8, 15625, 512e-6)
        assert all(0 < r["tcand_s"] < h.tobs for r in bursts)


def test_options_make_the_bursts_and_rfi(tmp_path, capsys):
    out = tmp_path / "o.fil"
    argv = ["simulate", str(out), "--nchans", "32", "--foff", "-8", "--fch1", "1500"]
    argv += ["--tsamp", "1e-3", "--nbits", "4", "--duration", "2", "--seed", "3"]
    argv += ["--dm", "100", "300", "--snr", "12", "--burst-time", "0.5", "1.2"]
    argv += ["--scattering", "0", "2e-3", "--n-bursts", "2", "--rfi", "impulsive:2:4"]
    argv += ["--rfi", "persistent"]
    assert main(argv) == 0
    assert "wrote" in capsys.readouterr().err
    rows = read_truth(tmp_path / "o.truth.csv")
    bursts = [r for r in rows if r["kind"] == "burst"]
    assert [(r["dm"], r["snr"], r["tcand_s"]) for r in bursts[:2]] == [
        (100, 12, 0.5),
        (300, 12, 1.2),
    ]
    assert bursts[1]["scattering_s"] == 2e-3 and len(bursts) == 4
    assert [r["kind"] for r in rows[4:]] == ["rfi_impulsive"] * 2 + ["rfi_persistent"]
    with open_observation(out) as reader:
        assert (reader.header.nchans, reader.header.nbits, reader.header.nsamples) == (32, 4, 2000)
        assert np.all(reader.read_all() <= 15)


def test_default_is_one_burst_and_no_rfi(tmp_path):
    assert main(["simulate", str(tmp_path / "d.fil"), "--duration", "2", "--quiet"]) == 0
    rows = read_truth(tmp_path / "d.truth.csv")
    assert [r["kind"] for r in rows] == ["burst"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--nbits", "7"], "nbits = 7"),
        (["--dm", "1", "2", "--snr", "1", "2", "3"], "--snr has 3 values for 2 bursts"),
        (["--rfi", "lightning"], "--rfi 'lightning'"),
        (["--rfi", "impulsive:x"], "COUNT must be an integer"),
        (["--dm", "-5"], "dm = -5.0"),
        (["--tsamp", "0"], "tsamp"),
        (["--burst-time", "99", "--dm", "10"], "beyond the end"),
    ],
)
def test_bad_options_give_one_line_and_status_2(tmp_path, capsys, extra, message):
    status = main(["simulate", str(tmp_path / "bad.fil"), "--quiet", *extra])
    err = capsys.readouterr().err
    assert status == 2
    assert message in err and "Traceback" not in err and err.count("\n") == 1
    assert not (tmp_path / "bad.fil").exists()
