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
from drafts_ops.detect.writers import read_csv
from drafts_ops.io import open_observation
from drafts_ops.simulate.bands import survey_band
from drafts_ops.simulate.truth import read_truth, truth_path, write_truth

#: Length of the warm-up observation (s): long enough for the sweep of DM 3000 in every
#: band, so that the warm-up plans every DM range the measured search does.
WARM_UP_S = 10.0
#: Orchestration paths and dedispersion modes the benchmark runs.
PATHS = ("direct", "flow")
MODES = ("production", "prototype")


@dataclass(frozen=True)
class SearchBenchConfig:
    """One benchmark observation and the search options it is searched with.

    Bands run down from ``fch1`` (MHz) in ``nchans`` channels of ``foff``; ``tsamp`` in s;
    ``duration_s`` of ``nbits`` data with ``n_bursts`` bursts (DM up to ``dm_max``) and one of
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
    dm_max: float = 3000.0
    time_decimation: int = 1
    freq_decimation: int = 1
    n_bursts: int = 20
    seed: int = 2026
    observation: str = ""
    nbits: int = 8
    #: ``fil`` (SIGPROC) or ``psrfits`` (PSRFITS as FAST writes it: 8-bit, one
    #: polarisation, :data:`PSRFITS_NSBLK` spectra a row, converted from the SIGPROC
    #: observation; its own name, so that the two truth tables do not collide).
    file_format: str = "fil"

    def simulation(self):
        """The :class:`~drafts_ops.simulate.SimulationConfig` of this observation."""
        from drafts_ops.simulate import RFISpec, SimulationConfig, random_bursts

        band = {"nchans": self.nchans, "fch1": self.fch1, "foff": self.foff, "tsamp": self.tsamp,
                "duration_s": self.duration_s, "nbits": self.nbits}  # fmt: skip
        header = SimulationConfig(**band).header()
        rng = np.random.default_rng(self.seed)
        bursts = random_bursts(self.n_bursts, header, rng,
                               dm_range=(50.0, 0.9 * self.dm_max))  # fmt: skip
        minutes = max(1, round(self.duration_s / 60))
        rfi = tuple(RFISpec(kind=kind, count=2 * minutes) for kind in
                    ("persistent", "impulsive", "drifting"))  # fmt: skip
        return SimulationConfig(**band, seed=self.seed, bursts=tuple(bursts), rfi=rfi)

    def options(self) -> dict[str, Any]:
        """Search options (``drafts search`` flags / SearchConfig fields) of this config:
        the DM range, and decimation only where it asks for some (else the defaults)."""
        decimation = {"time_decimation": self.time_decimation,
                      "freq_decimation": self.freq_decimation}  # fmt: skip
        return {"dm_max": self.dm_max, **{k: v for k, v in decimation.items() if v > 1}}

    def file_name(self) -> str:
        bits = "" if self.nbits == 8 else f"-{self.nbits}bit"
        stem = (f"{self.observation or self.name}-{self.nchans}ch-{self.tsamp * 1e6:g}us{bits}-"
                f"{self.duration_s:g}s-dm{self.dm_max:g}-seed{self.seed}")  # fmt: skip
        return f"{stem}.fil" if self.file_format == "fil" else f"{stem}-{self.file_format}.fits"

    @classmethod
    def from_band(cls, band: str, duration_s: float, **options: Any) -> SearchBenchConfig:
        """A configuration of the survey band ``band`` (:data:`SURVEY_BANDS`)."""

        b = survey_band(band)
        return cls(b.name, b.nchans, b.fch1, b.foff, b.tsamp, duration_s,
                   time_decimation=b.time_decimation, freq_decimation=b.freq_decimation,
                   **options)  # fmt: skip


def _fast_raw(name: str, time_decimation: int, freq_decimation: int) -> SearchBenchConfig:
    """The FAST raw observation (30 s) searched with the given decimation flags."""
    return replace(SearchBenchConfig.from_band("fast-raw", 30.0), name=name, observation="fast-raw",
                   time_decimation=time_decimation, freq_decimation=freq_decimation)  # fmt: skip


#: The survey-sized configurations (:data:`drafts_ops.simulate.bands.SURVEY_BANDS`), DM
#: 0-3000 with RFI. ``fast-raw``: FAST's own 4096 channels and 49.152 us with default
#: options (the search plans its DM ranges); ``fast-raw-x8t2f`` and ``fast-raw-x8f`` the
#: same observation with hand-picked decimation (as the evaluation searches it, and
#: coarser: faster, but wide channels lose high-DM bursts); ``fast-raw-f32`` 10 s of it as
#: 32-bit floats (calibrated or HDF5-converted data: 4 bytes a sample);
#: ``fast-raw-psrfits`` 10 s of it in FAST's own format (PSRFITS, 8-bit).
CONFIGS: dict[str, SearchBenchConfig] = {
    "fast": SearchBenchConfig.from_band("fast", 60.0),
    "fast-raw": _fast_raw("fast-raw", 1, 1),
    "fast-raw-f32": replace(_fast_raw("fast-raw-f32", 1, 1), duration_s=10.0, nbits=32),
    "fast-raw-psrfits": replace(
        _fast_raw("fast-raw-psrfits", 1, 1), duration_s=10.0, file_format="psrfits"
    ),
    "fast-raw-x8t2f": _fast_raw("fast-raw-x8t2f", 8, 2),
    "fast-raw-x8f": _fast_raw("fast-raw-x8f", 8, 8),
    "gbt": SearchBenchConfig.from_band("gbt", 120.0),
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
    #: Worst modelled S/N loss of the plan's DM ranges against an undecimated search.
    snr_loss: float = 0.0
    #: Injected bursts of S/N >= 8 found (:func:`recall`) and their number.
    found: int = 0
    injected: int = 0
    duration_s: float = 0.0

    @property
    def process_realtime_factor(self) -> float:
        """Observation s / s from the command's start to its exit."""
        return self.duration_s / self.process_wall_s if self.process_wall_s else 0.0

    @property
    def pipeline_kernel_ratio(self) -> float | None:
        """Kernel real-time factor / whole-search real-time factor (1 = kernel-bound)."""
        if not self.kernel_realtime_factor or not self.realtime_factor:
            return None
        return self.kernel_realtime_factor / self.realtime_factor


def observation_file(config: SearchBenchConfig, data_dir: Path) -> Path:
    """The simulated observation of ``config`` in ``data_dir`` (written on first use)."""
    from drafts_ops.simulate import write_simulation

    path = Path(data_dir) / config.file_name()
    if path.exists():
        return path
    if config.file_format == "psrfits":
        return psrfits_copy(observation_file(replace(config, file_format="fil"), data_dir), path)
    write_simulation(path, config.simulation(), progress=sys.stderr.isatty())
    return path


#: Spectra per PSRFITS row of the ``fits`` configurations (FAST's NSBLK).
PSRFITS_NSBLK = 1024


def psrfits_copy(sigproc: Path, path: Path) -> Path:
    """The observation ``sigproc`` written as PSRFITS to ``path`` (its whole rows of
    :data:`PSRFITS_NSBLK` spectra) with its truth table (the bursts that arrive in them)."""
    from drafts_ops.io.psrfits_writer import write_psrfits

    with open_observation(sigproc) as reader:
        nsamples = reader.header.nsamples // PSRFITS_NSBLK * PSRFITS_NSBLK
        header = reader.header.replace(nsamples=nsamples)
        data = reader.read_block(0, nsamples, raw=True)
    write_psrfits(path, header, data, nsblk=PSRFITS_NSBLK)
    rows = [r for r in read_truth(truth_path(sigproc)) if r["tcand_s"] < nsamples * header.tsamp]
    write_truth(truth_path(path), rows)
    return path


def kernel_realtime_factor(path: Path, config: SearchBenchConfig, mode: str,
                           repeats: int = 3) -> float:  # fmt: skip
    """Real-time factor of the dedispersion operator alone on the search's DM plan and
    block length (median of ``repeats`` after a warm-up), on normalised random data in
    the search's own form (uint8 where the search quantises). A plan in DM ranges: each
    range's block at its resolution, its trials a chunk at a time as the search does; the
    ranges' seconds per observation second add up."""

    cfg = search.SearchConfig(dedisp_mode=mode, **config.options())
    plan = search.plan_search(path, cfg)
    affine = {}
    if cfg.quantises or plan.ranges:  # the search's own kernel input: 8-bit samples
        offset, scale = quantised_levels(cfg.clip_pixels)
        affine = {"offset": offset, "scale": scale}
    if not plan.ranges:
        dm_plan = plan.dm_plan()
        data = _kernel_input(dm_plan.nchan, plan.blocks[0].read_len, cfg, bool(affine))
        jobs = [(dm_plan, np.empty((dm_plan.ndm, data.shape[1] - dm_plan.max_delay),
                                   np.float32))]  # fmt: skip
        seconds = jobs[0][1].shape[1] * plan.header.tsamp
        wall = _kernel_time(data, jobs, mode, cfg.algorithm, affine=affine, repeats=repeats)
        return seconds / wall
    per_second = 0.0
    for rng in plan.ranges:
        full = rng.dm_plan(plan.header)
        data = _kernel_input(full.nchan, rng.block_size + full.max_delay, cfg, True)
        chunks = [rng.chunk_plan(plan.header, t0, t1) for t0, t1 in rng.chunks()]
        flat = np.empty(rng.chunk_trials * (data.shape[1] - min(c.max_delay for c in chunks)),
                        np.float32)  # fmt: skip
        jobs = [(c, flat[: c.ndm * (data.shape[1] - c.max_delay)].reshape(c.ndm, -1))
                for c in chunks]  # fmt: skip
        wall = _kernel_time(data, jobs, mode, cfg.algorithm, affine=affine, repeats=repeats)
        per_second += wall / (rng.block_size * rng.factor * plan.header.tsamp)
    return 1.0 / per_second


def _kernel_input(nchan: int, nsamp: int, cfg: search.SearchConfig, levels: bool) -> np.ndarray:
    """Normalised random samples ``[nchan, nsamp]``: float32, or the search's 8-bit levels."""
    data = np.random.default_rng(0).standard_normal((nchan, nsamp), dtype=np.float32)
    if not levels:
        return data
    out = np.empty(data.shape, np.uint8)
    prepare_block(data, data.shape[1], out, auto=False, clip_pixels=cfg.clip_pixels)
    return out


def _kernel_time(data: np.ndarray, jobs: list, mode: str, algorithm: str, *, affine: dict,
                 repeats: int) -> float:  # fmt: skip
    """Median wall (s) of dedispersing ``data`` with each ``(plan, out)`` of ``jobs``,
    after one warm-up pass."""

    def run() -> None:
        for dm_plan, out in jobs:
            dedisperse(data, dm_plan, mode=mode, algorithm=algorithm, out=out, **affine)

    run()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def timed_run(cmd: list[str], env: dict[str, str], what: str) -> float:
    """Run ``cmd`` to its end; its wall seconds (a failure: one line with its last output)."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ParameterError(f"{what} failed: {' | '.join(tail)}")
    return wall


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
    process_wall = timed_run(cmd, env, f"{config.name} {run_path}/{mode}")
    doc = json.loads((out / "perf.json").read_text())
    total = doc["total"]
    found, injected = recall(truth_path(path), read_csv(out / "candidates.csv"))
    ranges = doc["run"].get("plan", {}).get("ranges", [])
    return RunFigures(
        config=config.name, path=run_path, mode=mode, wall_s=total["wall_s"],
        cpu_s=total["cpu_s"], realtime_factor=total["realtime_factor"],
        samples_per_s=total["samples_per_s"], peak_rss_mib=total["peak_rss_mib"],
        candidates=total["candidates"], stages={s["name"]: s["wall_s"] for s in doc["stages"]},
        process_wall_s=process_wall, notes=list(doc["run"].get("notes", [])),
        snr_loss=max((r["snr_loss"] for r in ranges), default=0.0), found=found,
        injected=injected, duration_s=doc["observation"]["duration_s"],
    )  # fmt: skip


#: A candidate matches an injected burst within this arrival time (s, at the top of the
#: band) and fraction of its DM: the peers' rule (``../shared/peers/match.py``), so that
#: every search is scored alike.
MATCH_DT_S = 0.05
MATCH_DM_FRACTION = 0.10
#: Injected S/N from which a burst counts towards the recall.
RECALL_SNR = 8.0


def recall(truth: Path, candidates: list[Any]) -> tuple[int, int]:
    """``(found, injected)``: injected bursts of S/N >= :data:`RECALL_SNR` in the truth
    table ``truth`` that some candidate (``tcand_s``, ``dm`` attributes) matches."""
    bursts = [r for r in read_truth(truth) if r["kind"] == "burst" and r["snr"] >= RECALL_SNR]
    times = np.array([c.tcand_s for c in candidates], np.float64)
    dms = np.array([c.dm for c in candidates], np.float64)
    found = sum(bool(np.any((np.abs(times - b["tcand_s"]) <= MATCH_DT_S)
                            & (np.abs(dms - b["dm"]) <= MATCH_DM_FRACTION * b["dm"])))
                for b in bursts)  # fmt: skip
    return found, len(bursts)


def bench_configs(names: list[str], *, duration_s: float | None = None,
                  dm_max: float | None = None) -> list[SearchBenchConfig]:  # fmt: skip
    """The named configurations, with the observation length (s) and highest DM
    (pc cm^-3) replaced where given."""
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise ParameterError(f"unknown configuration(s) {unknown}; known: {list(CONFIGS)}")
    changes = {k: v for k, v in (("duration_s", duration_s), ("dm_max", dm_max)) if v}
    return [replace(CONFIGS[name], **changes) for name in names]


def bench_data_dir(data_dir: Path | None) -> Path:
    """Where the simulated observations are kept (made if missing)."""
    path = Path(data_dir or Path(tempfile.gettempdir()) / "drafts-bench")
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_search_bench(
    names: list[str], *, paths: tuple[str, ...] = PATHS, modes: tuple[str, ...] = MODES,
    data_dir: Path | None = None, duration_s: float | None = None,
    dm_max: float | None = None, extra: dict[str, Any] | None = None,
) -> list[RunFigures]:  # fmt: skip
    """Benchmark each named configuration along each path and mode (after a short warm-up
    search that compiles the kernels, as a survey's first file would)."""
    configs = bench_configs(names, duration_s=duration_s, dm_max=dm_max)
    data_dir = bench_data_dir(data_dir)
    results = []
    for config in configs:
        path = observation_file(config, data_dir)
        # a short file over the whole DM range: every DM range's kernels compile here
        warm = replace(config, duration_s=WARM_UP_S, n_bursts=1)
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
    return (f"{r.config:<15}{r.path:<7}{r.mode:<11}{stages} {r.wall_s:7.2f}"
            f"{r.process_wall_s:7.1f}{r.cpu_s:7.1f}{r.realtime_factor:7.2f}"
            f"{r.process_realtime_factor:7.2f}{r.kernel_realtime_factor or 0:8.2f}"
            f"{(ratio or 0):7.2f}{r.peak_rss_mib:8.0f}{r.candidates:6d}"
            f"{f'{r.found}/{r.injected}':>8}{100 * r.snr_loss:6.1f}")  # fmt: skip


def format_table(results: list[RunFigures]) -> str:
    """Human-readable table: one row per run; stage walls in s."""
    stages = " ".join(f"{s[:7]:>7}" for s in STAGE_COLUMNS)
    totals = (f"{'wall':>7}{'proc':>7}{'cpu':>7}{'RTF':>7}{'pRTF':>7}{'kRTF':>8}{'p/k':>7}"
              f"{'RSS MiB':>8}{'cands':>6}{'recall':>8}{'loss%':>6}")  # fmt: skip
    head = f"{'config':<15}{'path':<7}{'mode':<11}{stages} {totals}"
    lines = [head, *(format_row(r) for r in results)]
    flows = {(r.config, r.mode): r for r in results if r.path == "flow"}
    for r in results:
        f = flows.get((r.config, r.mode))
        if r.path == "direct" and f is not None:
            lines.append(f"{r.config} {r.mode}: flow / direct wall = {f.wall_s / r.wall_s:.2f} "
                         f"(flow process incl. API start {f.process_wall_s:.1f} s)")  # fmt: skip
    lines.append(
        "stage walls, wall (the search's own, perf.json), proc (the process from start to "
        "exit) and cpu in s; RTF = observation s / wall s, pRTF = observation s / proc s; "
        "kRTF = dedispersion kernel alone on the same plan and blocks; p/k = kRTF/RTF; "
        f"recall = injected bursts of S/N >= {RECALL_SNR:g} found (|dt| <= "
        f"{1e3 * MATCH_DT_S:g} ms, |dDM| <= {100 * MATCH_DM_FRACTION:g} %); loss% = the "
        "plan's worst modelled S/N loss against an undecimated search"
    )
    return "\n".join(lines)


def results_json(results: list[RunFigures]) -> list[dict[str, Any]]:
    return [{**asdict(r), "pipeline_kernel_ratio": r.pipeline_kernel_ratio,
             "process_realtime_factor": r.process_realtime_factor} for r in results]  # fmt: skip
