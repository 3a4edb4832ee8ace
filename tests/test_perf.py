"""The performance log: measurements, totals, the perf.json schema round trip."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from drafts_ops.core.errors import DraftsError
from drafts_ops.core.perf import (
    SCHEMA,
    SCHEMA_VERSION,
    ObservationSize,
    PerfRecorder,
    StageRecord,
    read_perf,
)

SIZE = ObservationSize(nchans=64, nsamples=10_000, tsamp_s=1e-3, ndm=20)


def test_stage_measures_wall_cpu_and_traced_memory() -> None:
    perf = PerfRecorder(trace_memory=True)
    with perf.stage("busy", samples=SIZE.nsamples, cells=SIZE.cells):
        block = np.ones(2_000_000)  # 16 MB traced by tracemalloc
        deadline = time.process_time() + 0.05
        while time.process_time() < deadline:
            pass
        del block
    with perf.stage("sleep"):
        time.sleep(0.05)
    busy, sleep = perf.stages
    assert busy.cpu_s >= 0.05 and busy.wall_s >= busy.cpu_s * 0.5
    assert busy.peak_traced_mib == pytest.approx(16e6 / 2**20, rel=0.1)
    assert busy.cells_per_s == pytest.approx(SIZE.cells / busy.wall_s)
    assert sleep.wall_s >= 0.05 and sleep.cpu_s < 0.04
    assert sleep.samples_per_s is None  # not data-bound
    assert busy.peak_rss_mib > 10


def test_report_totals_and_json_round_trip(tmp_path: Path) -> None:
    stages = (StageRecord("plan", 0.5, 0.4), StageRecord("search", 1.5, 2.5, 10_000, SIZE.cells))
    perf = PerfRecorder()
    for s in stages:
        perf.add(s)
    report = perf.report(run={"dedisp_mode": "production", "algorithm": "brute"},
                         observation=SIZE, candidates=3)  # fmt: skip
    assert report.wall_s == 2.0 and report.cpu_s == pytest.approx(2.9)
    assert report.realtime_factor == pytest.approx(10.0 / 2.0)
    doc = json.loads(report.write(tmp_path).read_text())
    assert (doc["schema"], doc["schema_version"]) == (SCHEMA, SCHEMA_VERSION)
    assert doc["total"]["cells_per_s"] == pytest.approx(SIZE.cells / 2.0)
    assert doc["total"]["samples_per_s"] == pytest.approx(5000.0)
    assert doc["stages"][1]["samples_per_s"] == pytest.approx(10_000 / 1.5)
    assert doc["observation"]["duration_s"] == pytest.approx(10.0)
    again = read_perf(tmp_path)
    assert again.stages == stages and again.observation == SIZE and again.candidates == 3
    rows = report.table_rows()
    assert [r["name"] for r in rows] == ["plan", "search", "total"]
    assert "real-time x5.00" in report.summary_line()


def test_read_perf_rejects_other_documents(tmp_path: Path) -> None:
    (tmp_path / "perf.json").write_text('{"schema": "other"}')
    with pytest.raises(DraftsError, match="not a drafts-ops/perf"):
        read_perf(tmp_path)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_peak_rss_is_the_process_own_not_its_parents() -> None:
    """A search run as a child of a big process (the benchmark, a survey) reports its own
    peak memory: Linux's ru_maxrss would report the parent's 300 MiB."""
    import subprocess
    import sys

    held = np.ones(300 * 1024**2 // 8)  # touched: resident in this process
    code = "from drafts_ops.core.perf import peak_rss_mib; print(peak_rss_mib())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert held.sum() > 0 and float(done.stdout) < 200.0
