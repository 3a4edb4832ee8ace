"""``drafts bench search``: its configurations and its table."""

from __future__ import annotations

from drafts_ops.bench.search import CONFIGS, RunFigures, format_table
from drafts_ops.simulate.bands import survey_band


def test_fast_raw_is_benchmarked_at_the_evaluated_and_at_the_throughput_decimation():
    """``fast-raw`` searches as the evaluation does (the band's decimation); ``fast-raw-x8f``
    is the throughput issue's x8 x8 configuration, on the same simulated observation."""
    band = survey_band("fast-raw")
    evaluated, coarse = CONFIGS["fast-raw"], CONFIGS["fast-raw-x8f"]
    assert (evaluated.time_decimation, evaluated.freq_decimation) == (
        band.time_decimation, band.freq_decimation)  # fmt: skip
    assert (coarse.time_decimation, coarse.freq_decimation) == (8, 8)
    assert coarse.file_name() == evaluated.file_name()


def test_table_shows_the_pipeline_kernel_ratio_and_the_flow_overhead():
    def run(path, wall):
        return RunFigures("fast-raw-x8f", path, "production", wall, 2 * wall, 30.0 / wall, None,
                          1000.0, 17, {"dedisperse_detect": wall / 2}, wall + 1.0,
                          kernel_realtime_factor=60.0)  # fmt: skip

    table = format_table([run("direct", 6.0), run("flow", 6.6)])
    direct = table.splitlines()[1].split()
    assert direct[:2] == ["fast-raw-x8f", "direct"]
    assert direct[-5:-2] == ["5.00", "60.0", "12.00"]  # RTF, kernel RTF, p/k = 60 / 5
    assert "fast-raw-x8f production: flow / direct wall = 1.10" in table
