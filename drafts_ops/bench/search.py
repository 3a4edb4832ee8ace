"""End-to-end search benchmark: the whole search on survey-sized simulated observations.

``drafts bench search`` simulates each configuration once (cached on disk), then runs the
whole search on it, each run in a fresh process (so that its peak RSS is its own): the
direct path (:func:`drafts_ops.search.run_search` in the process) and the Prefect flow
(``drafts search``), in each dedispersion mode. It reads every run's ``perf.json`` and
measures, in the same run of the benchmark, the dedispersion kernel alone on the same DM
plan and block length, so the pipeline/kernel ratio is visible beside the stage figures.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from drafts_ops import search
from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp import dedisperse
from drafts_ops.detect.preprocess import prepare_block, quantised_levels
from drafts_ops.simulate import RFISpec, SimulationConfig, random_bursts, write_simulation
from drafts_ops.simulate.bands import survey_band

#: Orchestration paths and dedispersion modes the benchmark runs.
PATHS = ("direct", "flow")
MODES = ("production", "prototype")


@dataclass(frozen=True)
class SearchBenchConfig:
    """One benchmark observation and the search options it is searched with.

    Bands run down from ``fch1`` (MHz) in ``nchans`` channels of ``foff``; ``tsamp`` in s;
    ``duration_s`` of 8-bit data with ``n_bursts`` bursts (DM up to ``dm_max``) and one of
    each RFI kind per ``rfi_per_minute``; searched to ``dm_max`` with the given
    decimation. ``observation`` names the simulated file (configurations that search one
    observation at several decimations share it); default ``name``.
    """

    name: str
    nchans: int
    fch1: float
    foff: float
    tsamp: float
    duration_s: float
    dm_max: float = 2000.0
    time_decimation: int = 1
    freq_decimation: int = 1
    n_bursts: int = 20
    seed: int = 2026
    observation: str = ""

    def simulation(self):
        """The :class:`~drafts_ops.simulate.SimulationConfig` of this observation."""

        band = {"nchans": self.nchans, "fch1": self.fch1, "foff": self.foff,
                "tsamp": self.tsamp, "duration_s": self.duration_s}  # fmt: skip
        header = SimulationConfig(**band).header()
        rng = np.random.default_rng(self.seed)
        bursts = random_bursts(self.n_bursts, header, rng,
                               dm_range=(50.0, 0.9 * self.dm_max))  # fmt: skip
        minutes = max(1, round(self.duration_s / 60))
        rfi = tuple(RFISpec(kind=kind, count=2 * minutes) for kind in
                    ("persistent", "impulsive", "drifting"))  # fmt: skip
        return SimulationConfig(**band, seed=self.seed, bursts=tuple(bursts), rfi=rfi)

    def options(self) -> dict[str, Any]:
        """Search options (``drafts search`` flags / SearchConfig fields) of this config."""
        return {"dm_max": self.dm_max, "time_decimation": self.time_decimation,
                "freq_decimation": self.freq_decimation}  # fmt: skip

    def file_name(self) -> str:
        return (f"{self.observation or self.name}-{self.nchans}ch-{self.tsamp * 1e6:g}us-"
                f"{self.duration_s:g}s-seed{self.seed}.fil")  # fmt: skip

    @classmethod
    def from_band(cls, band: str, duration_s: float, **options: Any) -> SearchBenchConfig:
        """A configuration of the survey band ``band`` (:data:`SURVEY_BANDS`)."""

        b = survey_band(band)
        return cls(b.name, b.nchans, b.fch1, b.foff, b.tsamp, duration_s,
                   time_decimation=b.time_decimation, freq_decimation=b.freq_decimation,
                   **options)  # fmt: skip


#: The survey-sized configurations (:data:`drafts_ops.simulate.bands.SURVEY_BANDS`).
CONFIGS: dict[str, SearchBenchConfig] = {
    "fast": SearchBenchConfig.from_band("fast", 60.0),
    "fast-raw": SearchBenchConfig.from_band("fast-raw", 30.0),  # x8 t x2 f, as evaluated
    # the throughput issue's FAST raw configuration (x8 t x8 f), on the same observation:
    # faster, but its wide channels lose high-DM bursts (README "Search evaluation")
    "fast-raw-x8f": replace(
        SearchBenchConfig.from_band("fast-raw", 30.0),
        name="fast-raw-x8f",
        observation="fast-raw",
        freq_decimation=8,
    ),
    "gbt": SearchBenchConfig.from_band("gbt", 120.0),
    # FAST raw at its own resolution with default options: the search plans its DM ranges
    "fast-raw-native": replace(
        SearchBenchConfig.from_band("fast-raw", 30.0),
        name="fast-raw-native",
        observation="fast-raw",
        time_decimation=1,
        freq_decimation=1,
    ),
}


@dataclass
class RunFigures:
    """One search run: its perf.json figures and the kernel bound measured beside it."""

    config: str
    path: str
    mode: str
    wall_s: float
    cpu_s: float
    realtime_factor: float
    samples_per_s: float | None
    peak_rss_mib: float
    candidates: int
    stages: dict[str, float]
    process_wall_s: float
    kernel_realtime_factor: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def pipeline_kernel_ratio(self) -> float | None:
        """Kernel real-time factor / whole-search real-time factor (1 = kernel-bound)."""
        if not self.kernel_realtime_factor or not self.realtime_factor:
            return None
        return self.kernel_realtime_factor / self.realtime_factor


def observation_file(config: SearchBenchConfig, data_dir: Path) -> Path:
    """The simulated observation of ``config`` in ``data_dir`` (written on first use)."""

    path = Path(data_dir) / config.file_name()
    if not path.exists():
        write_simulation(path, config.simulation(), progress=sys.stderr.isatty())
    return path


def kernel_realtime_factor(path: Path, config: SearchBenchConfig, mode: str,
                           repeats: int = 3) -> float:  # fmt: skip
    """Real-time factor of the dedispersion operator alone on the search's DM plan and
    block length (median of ``repeats`` after a warm-up), on normalised random data in
    the search's own form (uint8 where the search quantises)."""

    cfg = search.SearchConfig(dedisp_mode=mode, **config.options())
    plan = search.plan_search(path, cfg)
    dm_plan = plan.dm_plan()
    block = plan.blocks[0]
    rng = np.random.default_rng(0)
    data = rng.standard_normal((dm_plan.nchan, block.read_len), dtype=np.float32)
    affine = {}
    if cfg.quantises:  # the search's own kernel input: 8-bit samples
        levels = np.empty(data.shape, np.uint8)
        prepare_block(data, data.shape[1], levels, auto=False, clip_pixels=cfg.clip_pixels)
        data = levels
        offset, scale = quantised_levels(cfg.clip_pixels)
        affine = {"offset": offset, "scale": scale}
    out = np.empty((dm_plan.ndm, block.read_len - dm_plan.max_delay), np.float32)
    run = lambda: dedisperse(data, dm_plan, mode=mode, algorithm=cfg.algorithm, out=out,  # noqa: E731
                             **affine)  # fmt: skip
    run()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return out.shape[1] * plan.header.tsamp / statistics.median(times)


def run_one(path: Path, config: SearchBenchConfig, run_path: str, mode: str, *, out: Path,
            extra: dict[str, Any]) -> RunFigures:  # fmt: skip
    """Search ``path`` once in a fresh process along ``run_path``; figures from perf.json."""
    options = {**config.options(), "dedisp_mode": mode, **extra}
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    if run_path == "direct":
        code = ("import json, sys; from drafts_ops import search; "
                "search.run_search(sys.argv[1], sys.argv[2], "
                "search.SearchConfig(**json.loads(sys.argv[3])))")  # fmt: skip
        cmd = [sys.executable, "-c", code, str(path), str(out), json.dumps(options)]
    elif run_path == "flow":
        flags = []
        for key, value in options.items():
            flags += [f"--{key.replace('_', '-')}", str(value)]
        cmd = [sys.executable, "-m", "drafts_ops", "search", str(path), "--out", str(out),
               "--no-progress", *flags]  # fmt: skip
    else:
        raise ParameterError(f"unknown bench path {run_path!r}; use {PATHS}")
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    process_wall = time.perf_counter() - t0
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ParameterError(f"{config.name} {run_path}/{mode} failed: {' | '.join(tail)}")
    doc = json.loads((out / "perf.json").read_text())
    total = doc["total"]
    return RunFigures(
        config=config.name, path=run_path, mode=mode, wall_s=total["wall_s"],
        cpu_s=total["cpu_s"], realtime_factor=total["realtime_factor"],
        samples_per_s=total["samples_per_s"], peak_rss_mib=total["peak_rss_mib"],
        candidates=total["candidates"], stages={s["name"]: s["wall_s"] for s in doc["stages"]},
        process_wall_s=process_wall, notes=list(doc["run"].get("notes", [])),
    )  # fmt: skip


def run_search_bench(
    names: list[str], *, paths: tuple[str, ...] = PATHS, modes: tuple[str, ...] = MODES,
    data_dir: Path | None = None, duration_s: float | None = None,
    dm_max: float | None = None, extra: dict[str, Any] | None = None,
) -> list[RunFigures]:  # fmt: skip
    """Benchmark each named configuration along each path and mode (after a short warm-up
    search that compiles the kernels, as a survey's first file would)."""
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise ParameterError(f"unknown configuration(s) {unknown}; known: {list(CONFIGS)}")
    data_dir = Path(data_dir or Path(tempfile.gettempdir()) / "drafts-bench")
    data_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for name in names:
        config = CONFIGS[name]
        changes = {k: v for k, v in (("duration_s", duration_s), ("dm_max", dm_max)) if v}
        config = replace(config, **changes)
        path = observation_file(config, data_dir)
        warm = replace(config, duration_s=4.0, dm_max=min(config.dm_max, 200.0), n_bursts=1)
        for mode in modes:  # compile the kernels for this shape and dtype (Numba's cache)
            with tempfile.TemporaryDirectory(dir=data_dir) as out:
                warm_path = observation_file(warm, data_dir)
                run_one(warm_path, warm, "direct", mode, out=Path(out), extra=extra or {})
        for mode in modes:
            kernel = kernel_realtime_factor(path, config, mode)
            for run_path in paths:
                with tempfile.TemporaryDirectory(dir=data_dir) as out:
                    figures = run_one(path, config, run_path, mode, out=Path(out),
                                      extra=extra or {})  # fmt: skip
                figures.kernel_realtime_factor = kernel
                results.append(figures)
                print(format_row(figures), file=sys.stderr, flush=True)
    return results


STAGE_COLUMNS = ("plan", "dedisperse_detect", "merge", "cutouts", "classify", "write", "report")


def format_row(r: RunFigures) -> str:
    ratio = r.pipeline_kernel_ratio
    stages = " ".join(f"{r.stages.get(s, 0.0):7.2f}" for s in STAGE_COLUMNS)
    return (f"{r.config:<13}{r.path:<7}{r.mode:<11}{stages} {r.wall_s:7.2f}{r.cpu_s:7.1f}"
            f"{r.realtime_factor:8.2f}{r.kernel_realtime_factor or 0:8.1f}"
            f"{(ratio or 0):7.2f}{r.peak_rss_mib:8.0f}{r.candidates:6d}")  # fmt: skip


def format_table(results: list[RunFigures]) -> str:
    """Human-readable table: one row per run; stage walls in s."""
    stages = " ".join(f"{s[:7]:>7}" for s in STAGE_COLUMNS)
    totals = f"{'wall':>7}{'cpu':>7}{'RTF':>8}{'kRTF':>8}{'p/k':>7}{'RSS MiB':>8}{'cands':>6}"
    head = f"{'config':<13}{'path':<7}{'mode':<11}{stages} {totals}"
    lines = [head, *(format_row(r) for r in results)]
    flows = {(r.config, r.mode): r for r in results if r.path == "flow"}
    for r in results:
        f = flows.get((r.config, r.mode))
        if r.path == "direct" and f is not None:
            lines.append(f"{r.config} {r.mode}: flow / direct wall = {f.wall_s / r.wall_s:.2f} "
                         f"(flow process incl. API start {f.process_wall_s:.1f} s)")  # fmt: skip
    lines.append(
        "stage walls and wall/cpu in s (perf.json); RTF = observation s / wall s; "
        "kRTF = dedispersion kernel alone on the same plan and block; p/k = kRTF/RTF"
    )
    return "\n".join(lines)


def results_json(results: list[RunFigures]) -> list[dict[str, Any]]:
    return [{**asdict(r), "pipeline_kernel_ratio": r.pipeline_kernel_ratio} for r in results]
