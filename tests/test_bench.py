"""``drafts bench dedisp`` on a tiny configuration: keys, positive figures, consistency."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drafts_ops.bench.dedisp import (
    BENCH_PATHS,
    BenchConfig,
    BenchPath,
    format_table,
    register_bench_path,
    run_bench,
)
from drafts_ops.cli import main
from drafts_ops.core.errors import ParameterError

TINY = BenchConfig(nchans=16, dm_max=40.0, dm_step=1.0, nout=300, repeats=2)


def test_run_bench_tiny():
    results, meta = run_bench(TINY)
    assert list(results) == [
        "reference", "prototype", "production-brute", "production-subband",
        "production-subband-8bit", "production-fast",
    ]  # fmt: skip
    assert meta["ndm"] == 41
    ref, proto = results["reference"], results["prototype"]
    assert ref.scaled and ref.ndm_measured == 32
    assert not proto.scaled and proto.ndm_measured == 41 and len(proto.timings) == 2
    for r in results.values():
        assert r.seconds > 0
        assert r.ops_per_s == pytest.approx(16 * 300 * 41 / r.seconds)
        assert r.realtime_factor == pytest.approx(300 * TINY.tsamp / r.seconds)
    assert proto.speedup_vs_prototype == 1.0
    assert ref.speedup_vs_prototype == pytest.approx(proto.seconds / ref.seconds)
    assert ref.max_rel_diff_vs_prototype < 1e-6
    assert results["production-brute"].max_rel_diff_vs_prototype < 1e-5
    assert results["production-fast"].ndm_measured == 41  # equal DM coverage
    eight_bit, float32 = results["production-subband-8bit"], results["production-subband"]
    assert eight_bit.max_rel_diff_vs_prototype == float32.max_rel_diff_vs_prototype  # same sums
    text = format_table(results, meta)
    assert "scaled from 32 DMs" in text and "41 trials" in text


def test_registered_path_is_measured_and_compared():
    def broken(plan):
        return lambda data: np.zeros((plan.ndm, data.shape[1] - plan.max_delay), np.float32)

    register_bench_path("zeros", BenchPath(broken, max_ndm=8))
    try:
        results, _ = run_bench(TINY, ["prototype", "zeros"])
    finally:
        del BENCH_PATHS["zeros"]
    assert results["zeros"].ndm_measured == 8
    assert results["zeros"].max_rel_diff_vs_prototype == pytest.approx(1.0)


def test_unknown_path_raises():
    with pytest.raises(ParameterError, match="unknown bench path"):
        run_bench(TINY, ["nope"])


def test_cli_json(capsys):
    argv = ["bench", "dedisp", "--json", "--nchans", "16", "--dm-max", "20", "--nout", "200"]
    assert main([*argv, "--repeats", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {
        "reference", "prototype", "production-brute", "production-subband",
        "production-subband-8bit", "production-fast",
    }  # fmt: skip
    for figures in report.values():
        assert figures["seconds"] > 0 and figures["ops_per_s"] > 0
        assert figures["realtime_factor"] > 0
        assert figures["speedup_vs_prototype"] > 0
    fast = report["production-fast"]
    assert fast["speedup_vs_prototype"] == pytest.approx(
        report["prototype"]["seconds"] / fast["seconds"]
    )
