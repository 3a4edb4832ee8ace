"""Validation report: prototype against production, on simulated and real data.

A deliberately broken production path (a one-sample delay error in one DM trial and
channel) must fail the report and be located to exactly that trial and channel.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.dedisp.reference import dedisperse_reference
from drafts_ops.detect.candidates import Candidate
from drafts_ops.validation import DelayFault, Thresholds, ValidationConfig, validate_files
from drafts_ops.validation.agreement import match_candidates
from drafts_ops.validation.parity import compare_outputs, locate_differences
from drafts_ops.validation.runner import BASELINE, apply_fault, probe_data
from tests.validation_data import SIM_BURST, write_small_simulation

SIM_CONFIG = ValidationConfig(dm_min=0.0, dm_max=300.0, block_size=700)


@pytest.fixture(scope="module")
def sim_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_small_simulation(tmp_path_factory.mktemp("sim") / "sim.fil")


@pytest.fixture(scope="module")
def sim_report(sim_file: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("sim-report")
    report, paths = validate_files([sim_file], out, SIM_CONFIG)
    return report, paths


@pytest.fixture(scope="module")
def real_report(real_data: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("real-report")
    config = ValidationConfig(dm_min=300.0, dm_max=650.0, block_size=2048)
    return validate_files([real_data / "28.fil"], out, config)


def _parity(result, path: str):
    return next(p for p in result.parity if p.path == path)


def test_simulated_observation_report(sim_report) -> None:
    report, paths = sim_report
    assert report.passed, "\n".join(map(str, report.verdict))
    assert not (paths["html"].parent / "work").exists()  # the DM-time arrays are gone
    (result,) = report.files
    checks = [(line.path, line.check) for line in result.verdict]
    assert checks[:3] == [
        ("production/brute", "parity (file)"),
        ("production/brute", "parity (random-data probe)"),
        ("production/brute", "candidates"),
    ]
    for line in result.verdict[3:]:  # approximate algorithms: bounded S/N loss
        assert line.check in {"snr loss", "candidates"}, line
        if line.check == "snr loss":
            # sub-band may win by a fraction of a percent where rounding favours it
            assert -0.01 <= line.measured <= 0.05 and line.threshold == 0.05
    assert result.paths[0] == BASELINE and "production/brute" in result.paths
    assert result.overlap == result.plan["max_delay_samples"] > 200
    assert result.performance[0]["nblocks"] == -(-(2400 - result.overlap) // 700)
    brute = _parity(result, "production/brute")
    assert brute.max_abs_diff == 0.0 and brute.frac_identical == 1.0
    assert brute.n_differing_rows == 0
    (burst,) = result.bursts
    assert burst["source"] == "truth" and burst["dm"] == SIM_BURST["dm"]
    proto = burst["snr"][BASELINE]
    assert abs(proto["dm"] - SIM_BURST["dm"]) <= 5 and abs(proto["t_s"] - SIM_BURST["t_s"]) < 0.005
    assert 0.7 * SIM_BURST["snr"] < proto["snr"] < 1.2 * SIM_BURST["snr"]
    assert burst["loss"]["production/brute"] == 0.0
    for path, loss in burst["loss"].items():  # loss = 1 - S/N(path) / S/N(prototype)
        assert loss == pytest.approx(1 - burst["snr"][path]["snr"] / proto["snr"]), path
        assert abs(burst["snr"][path]["dm"] - SIM_BURST["dm"]) <= 5, path
    assert burst["replica_loss"]["production/brute"] == 0.0
    for agreement in result.agreement:
        assert agreement.unmatched_significant == 0 and agreement.matched
    for row in result.performance:
        assert row["dedisperse_s"] > 0 and row["cells_per_s"] > 0 and row["realtime_factor"] > 0
        assert row["cells"] == 64 * (2400 - result.overlap) * result.plan["ndm"]
    assert set(paths) == {"html", "md", "json"}


def test_real_observation_passes(real_report) -> None:
    report, _ = real_report
    assert report.passed, "\n".join(map(str, report.verdict))
    (result,) = report.files
    burst = result.bursts[0]  # no truth table: the prototype's brightest candidate
    assert burst["source"] == "detected"
    assert abs(burst["dm"] - 475) <= 5 and abs(burst["t_s"] - 2.029) <= 0.01
    assert 13.0 < burst["snr"][BASELINE]["snr"] < 18.0
    assert _parity(result, "production/brute").max_abs_diff == 0.0
    assert all(p.max_abs_diff == 0.0 for p in result.probe)
    curves = result.snr_vs_dm["snr"][BASELINE]
    assert abs(result.dms[int(np.argmax(curves))] - 475) <= 5


def test_reports_agree_and_show_numbers(real_report) -> None:
    _, paths = real_report
    doc = json.loads(paths["json"].read_text())
    assert doc["passed"] is True and doc["schema"] == "drafts-ops/validation"
    assert doc["platform"]["cores"] >= 1
    perf = doc["files"][0]["performance"]
    assert perf[0]["path"] == BASELINE and perf[0]["speedup_vs_prototype"] == 1.0
    md = paths["md"].read_text()
    assert "# drafts-ops validation: PASS" in md and "| production/brute | 0 | 0 | 100.000%" in md
    brute_speed = next(r for r in perf if r["path"] == "production/brute")
    assert f"{brute_speed['speedup_vs_prototype']:.2f}x" in md


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs)["src"])


def test_html_is_self_contained(real_report) -> None:
    _, paths = real_report
    text = paths["html"].read_text()
    assert not re.search(r"https?://", text)
    parser = _Tags()
    parser.feed(text)
    parser.close()
    assert {"html", "head", "style", "body", "table", "h1", "img"} <= set(parser.tags)
    assert "link" not in parser.tags and "script" not in parser.tags
    assert len(parser.images) == 4  # DM-time, S/N vs DM, throughput, differences (subband)
    assert all(src.startswith("data:image/png;base64,") for src in parser.images)


@pytest.mark.slow
def test_html_renders_in_chromium(real_report, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed")
    _, paths = real_report
    shot = tmp_path / "validation.png"
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--window-size=1400,2600", f"--screenshot={shot}", paths["html"].as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (2600, 1400)
    assert pixels[..., :3].std() > 0.05  # tables and figures, not a blank page


@pytest.mark.parametrize(("dm_index", "channel", "shift"), [(12, 17, 1), (-1, -1, 1), (20, 40, -1)])
def test_broken_production_path_fails_and_is_located(
    sim_file: Path, tmp_path: Path, dm_index: int, channel: int, shift: int
) -> None:
    plan = DMPlan.from_header(_header(sim_file), SIM_CONFIG.dm_min, SIM_CONFIG.dm_max)
    dm_index, channel = dm_index % plan.ndm, channel % plan.nchan
    fault = DelayFault(dm_index, channel, shift)
    config = ValidationConfig(**{**SIM_CONFIG.to_dict(), "thresholds": Thresholds(),
                                 "delay_fault": fault, "algorithms": ("brute",)})  # fmt: skip
    report, paths = validate_files([sim_file], tmp_path, config, plots=False)
    assert not report.passed
    (result,) = report.files
    failed = {(v.path, v.check) for v in result.verdict if not v.passed}
    assert ("production/brute", "parity (file)") in failed
    assert ("production/brute", "parity (random-data probe)") in failed
    assert _parity(result, "production/brute").differing_rows == [dm_index]
    (loc,) = result.localisation
    assert loc.differing_rows == [dm_index]
    assert [(f.dm_index, f.channel, f.shift) for f in loc.faults] == [(dm_index, channel, shift)]
    assert loc.faults[0].delay_expected == plan.delays[dm_index, channel]
    assert f"channel {channel}" in paths["md"].read_text()
    assert json.loads(paths["json"].read_text())["passed"] is False


def _header(path: Path):
    from drafts_ops.io import open_observation

    with open_observation(path) as reader:
        return reader.header


def _plan(nchan: int = 48, ndm: int = 24) -> DMPlan:
    return DMPlan.build(np.linspace(0, 400, ndm), 1500.0 - 5.0 * np.arange(nchan), 1e-3)


def test_locate_finds_several_faulty_channels() -> None:
    plan = _plan()
    bad = plan.delays.copy()
    bad[[3, 3, 9], [5, 30, 30]] += [2, -1, 1]
    reference = lambda x: dedisperse_reference(x, plan.delays)  # noqa: E731
    broken = lambda x: dedisperse_reference(x, bad)  # noqa: E731
    overlap = int(bad.max())
    data = probe_data(plan, overlap, 256)
    loc = locate_differences("broken", reference, broken, plan, data, nout=256)
    assert loc.differing_rows == [3, 9] and loc.channels == [5, 30]
    found = sorted((f.dm_index, f.channel, f.shift) for f in loc.faults)
    assert found == [(3, 5, 2), (3, 30, -1), (9, 30, 1)]
    assert loc.calls < 2 * 48  # bisection, not one run per channel
    same = locate_differences("same", reference, reference, plan, data, nout=256)
    assert same.faults == [] and same.max_abs_diff == 0.0


def test_compare_outputs_values() -> None:
    plan = _plan(ndm=3)
    ref = np.arange(12, dtype=np.float32).reshape(3, 4)
    other = ref.copy()
    other[1, 2] += 0.5
    p = compare_outputs("x", ref, other, plan)
    assert p.max_abs_diff == 0.5 and p.max_rel_diff == pytest.approx(0.5 / 11)
    assert p.frac_identical == pytest.approx(11 / 12)
    assert p.differing_rows == [1] and (p.worst_dm_index, p.worst_sample) == (1, 2)
    assert p.worst_dm == pytest.approx(plan.dms[1]) and p.row_max_abs == [0.0, 0.5, 0.0]


def _cand(t: float, dm: float, snr: float) -> Candidate:
    return Candidate(tcand_s=t, dm=dm, snr=snr, width_samples=2, width_s=2e-3, dm_index=0,
                     sample=round(t / 1e-3))  # fmt: skip


def test_match_candidates_within_tolerances() -> None:
    plan = DMPlan.build(np.arange(0, 101, 1.0), [1500.0, 1400.0], 1e-3)
    t = Thresholds(time_tol_s=0.01, dm_tol=5.0, match_snr=8.0)
    proto = [_cand(1.0, 50.0, 20.0), _cand(2.0, 30.0, 7.0), _cand(3.0, 80.0, 9.0)]
    prod = [_cand(1.004, 53.0, 19.0), _cand(2.5, 30.0, 7.1), _cand(3.0, 90.0, 9.5)]
    a = match_candidates("p", proto, prod, plan, t)
    assert [(m["prototype"]["tcand_s"], m["production"]["tcand_s"]) for m in a.matched] == [
        (1.0, 1.004)
    ]
    assert [c["tcand_s"] for c in a.prototype_only] == [3.0, 2.0]
    assert sorted(c["tcand_s"] for c in a.production_only) == [2.5, 3.0]
    assert a.unmatched_significant == 2  # the S/N 9 and 9.5 ones (DM 80 vs 90: > 5 apart)


def test_bad_parameters_are_parameter_errors(sim_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="delay fault"):
        DelayFault.parse("3")
    assert DelayFault.parse("3,4,-1,subband") == DelayFault(3, 4, -1, "subband")
    with pytest.raises(ParameterError, match="DM range"):
        ValidationConfig(dm_min=10, dm_max=5)
    with pytest.raises(ParameterError, match="outside the plan"):
        apply_fault(_plan(), DelayFault(99, 0))
    with pytest.raises(ParameterError, match="not available"):
        validate_files([sim_file], tmp_path, ValidationConfig(dm_max=100, algorithms=("nope",)))
    with pytest.raises(ParameterError, match="maximum dispersion delay"):
        validate_files([sim_file], tmp_path, ValidationConfig(dm_max=5000))
