"""The validation report walks the search's DM ranges (issue 50): each range validated at
its own time resolution, the file's samples averaged as the search averages them."""

from __future__ import annotations

import pytest

from drafts_ops.dedisp.ddplan import plan_ranges
from drafts_ops.validation import DelayFault, ValidationConfig, validate_files

#: A low band at 256 us: averaging pays from DM ~46 (x2) to x8 above DM ~220.
BAND = {"nchans": 64, "fch1": 800.0, "foff": -2.0, "tsamp": 256e-6}
BURST_DM = 150.0


@pytest.fixture(scope="module")
def ranged_file(tmp_path_factory):
    from drafts_ops.simulate import BurstSpec, SimulationConfig, write_simulation

    burst = BurstSpec(t_s=1.2, dm=BURST_DM, snr=30.0, width_s=1e-3)
    config = SimulationConfig(**BAND, duration_s=3.0, seed=3, bursts=(burst,))
    return write_simulation(tmp_path_factory.mktemp("ranged") / "ranged.fil", config)


def _validate(path, out, **options):
    config = ValidationConfig(dm_max=300.0, block_size=2048, **options)
    report, _ = validate_files([path], out, config, plots=False)
    return report


def test_each_dm_range_is_validated_at_its_own_resolution(ranged_file, tmp_path):
    report = _validate(ranged_file, tmp_path)
    ranges = plan_ranges(0.0, 300.0, **BAND)
    assert len(ranges) > 2
    assert [f.factor for f in report.files] == [r.factor for r in ranges]
    for result, rng in zip(report.files, ranges, strict=True):
        assert result.header["tsamp_s"] == pytest.approx(BAND["tsamp"] * rng.factor)
        assert result.dms[0] == pytest.approx(float(rng.dms[0]))
        assert f"{rng.factor} sample" in result.label
    assert report.passed, [str(line) for line in report.verdict if not line.passed]
    # the burst is checked in the range holding its DM, on that range's averages
    holder = next(f for f in report.files if f.dms[0] <= BURST_DM <= f.dms[-1])
    assert holder.factor > 1
    assert holder.bursts and holder.bursts[0]["snr"]["prototype"]["snr"] > 10


def test_one_plan_at_the_files_resolution_without_ranges(ranged_file, tmp_path):
    """(This band's native plan is a harder test of the sub-band operator than the search
    runs: its 1 ms burst at DM 150 loses 5.8 % there, 0 % in the range the search uses.)"""
    report = _validate(ranged_file, tmp_path, dm_ranges=False)
    assert [f.factor for f in report.files] == [1]
    assert report.files[0].label == str(ranged_file)
    assert report.files[0].header["tsamp_s"] == pytest.approx(BAND["tsamp"])


def test_a_delay_fault_fails_the_first_range_only(ranged_file, tmp_path):
    fault = DelayFault(dm_index=5, channel=40, shift=1, algorithm="brute")
    report = _validate(ranged_file, tmp_path, delay_fault=fault, algorithms=("brute",))
    assert not report.files[0].passed
    assert all(f.passed for f in report.files[1:])


def test_the_command_prints_each_ranges_verdict_under_its_range(
    prefect_harness, ranged_file, tmp_path, capsys
):
    from drafts_ops.cli import main

    small = ["--dm-max", "300", "--block-size", "2048", "--algorithms", "brute"]
    assert main(["validate", str(ranged_file), "--out", str(tmp_path / "a"), *small]) == 0
    printed = capsys.readouterr().out
    heads = [line for line in printed.splitlines() if line.startswith(str(ranged_file))]
    assert len(heads) == len(plan_ranges(0.0, 300.0, **BAND)) > 2
    assert "[DM 0.0-" in heads[0] and "1 sample averaged" in heads[0]
    assert main(["validate", str(ranged_file), "--out", str(tmp_path / "b"), *small,
                 "--no-dm-ranges"]) == 0  # fmt: skip
    assert not any("[DM" in line for line in capsys.readouterr().out.splitlines())
