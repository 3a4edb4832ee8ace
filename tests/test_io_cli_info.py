"""``drafts info``: table, JSON, and one-line errors."""

from __future__ import annotations

import json

from drafts_ops.cli import main
from drafts_ops.io.sigproc import write_sigproc
from tests._io_util import make_header, random_samples


def _demo(tmp_path, rng):
    return write_sigproc(
        tmp_path / "demo.fil", make_header(16, 8), random_samples(rng, (16, 50), 8)
    )


def test_info_table(tmp_path, rng, capsys):
    path = _demo(tmp_path, rng)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"== {path} (sigproc) ==" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert rows["nchans"] == ["16"]
    assert rows["fch1"] == ["1500.0", "MHz"]
    assert rows["tsamp"] == ["0.000256", "s"]
    assert rows["nsamples"] == ["50"]
    assert rows["telescope"] == ["Parkes"]
    assert rows["tstart_utc"] == ["2023-02-25T06:00:00.000000"]


def test_info_json(tmp_path, rng, real_data, capsys):
    path = _demo(tmp_path, rng)
    assert main(["info", "--json", str(path), str(real_data / "small.fits")]) == 0
    result = json.loads(capsys.readouterr().out)
    demo = result[str(path)]
    assert demo["format"] == "sigproc"
    assert (demo["nchans"], demo["nbits"], demo["nsamples"]) == (16, 8, 50)
    assert demo["foff"] == -0.5
    assert demo["tobs_s"] == 50 * 0.000256
    fits = result[str(real_data / "small.fits")]
    assert fits["format"] == "psrfits"
    assert fits["nsamples"] == 789


def test_info_error_is_one_line_without_traceback(tmp_path, capsys):
    missing = tmp_path / "absent.fil"
    assert main(["info", str(missing)]) != 0
    captured = capsys.readouterr()
    err_lines = captured.err.strip().splitlines()
    assert len(err_lines) == 1
    assert str(missing) in err_lines[0]
    assert "no such file" in err_lines[0]
    assert "Traceback" not in captured.err + captured.out


def test_info_json_reports_errors_per_file(tmp_path, rng, capsys):
    good = _demo(tmp_path, rng)
    bad = tmp_path / "empty.fil"
    bad.write_bytes(b"")
    assert main(["info", "--json", str(good), str(bad)]) != 0
    result = json.loads(capsys.readouterr().out)
    assert result[str(good)]["nchans"] == 16
    assert "empty file" in result[str(bad)]["error"]
