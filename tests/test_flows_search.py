"""The search flow end to end, in both dedispersion modes, with its performance log."""

from __future__ import annotations

import csv
import json
import threading
from pathlib import Path

import pytest

import flows.search
from drafts_ops.core.perf import SCHEMA, read_perf
from drafts_ops.core.resources import resource_path
from drafts_ops.detect.writers import read_csv
from drafts_ops.search import STAGES
from drafts_ops.search.config import SearchOptions
from flows.search import BlockProgress, CountProgress, artifact_key, search_flow

#: The demo search: DM 0..1000 in blocks of 4096 samples; brute force in both modes, so
#: that their candidates must agree exactly.
DEMO = {
    "block_size": 4096,
    "write_plots": False,
    "max_outputs": 2,
    "max_workers": 2,
    "dm_max": 1000.0,
    "algorithm": "brute",
}


def _bursts() -> list[dict[str, float]]:
    """Injected bursts of the demo observation (data/demo.truth.csv)."""
    with resource_path("data", "demo.truth.csv").open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kind"] == "burst"]
    return [{"tcand_s": float(r["tcand_s"]), "dm": float(r["dm"])} for r in rows]


@pytest.fixture(scope="module")
def observation() -> Path:
    return resource_path("data", "demo.fil")


@pytest.fixture(scope="module")
def both_modes(prefect_harness, observation: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("search")
    results = {}
    for mode in ("prototype", "production"):
        options = SearchOptions(dedisp_mode=mode, **DEMO)
        results[mode] = search_flow(str(observation), str(out / mode), options)
    return results


def test_search_finds_the_demo_bursts_in_both_modes(both_modes) -> None:
    found = {}
    for mode, result in both_modes.items():
        cands = read_csv(Path(result["outputs"]["csv"]))
        assert result["candidates"] == len(cands)
        for burst in _bursts():
            near = [c for c in cands if abs(c.tcand_s - burst["tcand_s"]) < 0.01]
            assert near, f"{mode}: no candidate near the burst at {burst}"
            best = max(near, key=lambda c: c.snr)
            assert best.dm == pytest.approx(burst["dm"], rel=0.03)
            assert best.snr > 8
        assert Path(result["outputs"]["h5:0"]).exists()
        found[mode] = cands
    proto, prod = found["prototype"], found["production"]
    assert [(c.dm_index, c.sample, c.width_samples) for c in proto] == [
        (c.dm_index, c.sample, c.width_samples) for c in prod
    ]
    assert [c.snr for c in proto] == pytest.approx([c.snr for c in prod], rel=1e-4)


def test_perf_json_per_run(both_modes) -> None:
    for mode, result in both_modes.items():
        doc = json.loads(Path(result["perf"]).read_text())
        assert doc["schema"] == SCHEMA
        assert doc["run"]["dedisp_mode"] == mode
        assert doc["run"]["orchestrator"] == "prefect"
        assert [s["name"] for s in doc["stages"]] == list(STAGES)
        obs = doc["observation"]
        assert obs["duration_s"] == pytest.approx(obs["nsamples"] * obs["tsamp_s"])
        dd = doc["stages"][1]
        assert dd["calls"] == 4  # 15625 samples (to the end of the data) in blocks of 4096
        assert dd["cells"] == obs["nchans"] * obs["nsamples"] * obs["ndm"]
        assert dd["cells_per_s"] == pytest.approx(dd["cells"] / dd["wall_s"])
        total = doc["total"]
        assert total["wall_s"] == pytest.approx(sum(s["wall_s"] for s in doc["stages"]))
        assert total["realtime_factor"] == pytest.approx(obs["duration_s"] / total["wall_s"])
        assert total["candidates"] == result["candidates"]
        assert read_perf(Path(result["perf"]).parent).stage("merge").calls == 1


def test_perf_artifact_published(both_modes, observation: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    key = artifact_key("perf", observation, "production")
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key]))
        )
    assert arts and arts[0].type == "table"
    rows = json.loads(arts[0].data)
    assert [r["name"] for r in rows] == [*STAGES, "total"]


def test_options_reject_unknown_and_bad_values() -> None:
    from pydantic import ValidationError

    from drafts_ops.core.errors import OptionError

    with pytest.raises(OptionError, match="dm_maxx = 3: unknown option"):
        SearchOptions(dm_maxx=3)
    with pytest.raises(OptionError, match="dedisp_mode = 'fast'"):
        SearchOptions(dedisp_mode="fast")
    with pytest.raises(OptionError, match=r"DM range 10\.0\.\.5\.0"):
        SearchOptions(dm_min=10, dm_max=5)
    with pytest.raises(ValidationError):  # a flow run's parameters are validated by pydantic
        SearchOptions.model_validate({"dm_max": -1})
    options = SearchOptions(dm_max=500)
    with pytest.raises(ValidationError):
        options.dm_max = 3  # frozen
    assert options.config().dm_max == 500


def test_artifact_key_is_valid() -> None:
    assert artifact_key("perf", "/x/My_File.v2.fil", "production") == "perf-my-file-v2-production"


def test_every_search_setting_is_an_option() -> None:
    """SearchOptions (CLI and flows) are SearchConfig's fields, declared once, plus how a
    search is run."""
    from drafts_ops.search import SearchConfig

    fields = SearchConfig.model_fields
    options = SearchOptions.model_fields
    assert set(options) - set(fields) == {"max_workers", "trace_memory", "keep_intermediates"}
    assert all(options[k] is fields[k] or options[k].default == fields[k].default for k in fields)
    config = SearchOptions(mask_channels=(3, 4), classifier_threshold=0.8, time_link=4).config()
    assert (config.mask_channels, config.classifier_threshold, config.time_link) == ((3, 4), 0.8, 4)


def test_mask_channels_on_the_command_line(tmp_path) -> None:
    import argparse

    from drafts_ops.cli.options import add_option_arguments, options_from_args

    parser = argparse.ArgumentParser()
    add_option_arguments(parser, SearchOptions)
    args = parser.parse_args(["--mask-channels", "3", "7", "--ml-min-snr", "6"])
    options = options_from_args(SearchOptions, args)
    assert options.mask_channels == (3, 7) and options.config().ml_min_snr == 6.0


def test_progress_advances_block_by_block_by_each_blocks_work(
    prefect_harness, observation: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bar of `drafts search` moves as each block is searched (reported by the thread
    that searched it, not once at the end of the one local segment), by the block's share of
    the work, and ends at 100 %, each block counted once; a second bar counts the
    candidates' cutouts, one by one."""
    bars: list[BlockProgress] = []
    reporters: list[tuple[int, str]] = []
    counted: list[tuple[str, int, int]] = []

    class Counted(CountProgress):
        def update_to(self, done: int, total: int) -> None:
            counted.append((self.desc, done, total))
            super().update_to(done, total)

    class Recorded(BlockProgress):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            bars.append(self)

        def block_done(self, index: int) -> None:
            reporters.append((index, threading.current_thread().name))
            super().block_done(index)

    monkeypatch.setattr(flows.search, "BlockProgress", Recorded)
    monkeypatch.setattr(flows.search, "CountProgress", Counted)
    options = SearchOptions(**{**DEMO, "max_outputs": 0, "dm_max": 400.0})
    result = search_flow(str(observation), str(tmp_path / "out"), options, progress=True)
    cands = result["candidates"]  # every candidate is classified: each gets its cutouts
    assert cands > 1
    assert counted == [(f"{observation.name}: cutouts", k, cands) for k in range(1, cands + 1)]
    (bar,) = bars
    blocks = len(bar.shares)
    assert blocks > 2 and sum(bar.shares) == pytest.approx(1.0)
    main = threading.main_thread().name
    assert sorted(i for i, thread in reporters if thread != main) == list(range(blocks))
    assert bar.counted == set(range(blocks))
    assert bar.bar.n == pytest.approx(100.0) and bar.bar.n <= 100.0
