"""Dedispersion benchmark: every path on one configuration, measured in one run.

Each entry of :data:`BENCH_PATHS` is a :class:`BenchPath`: a factory that takes the DM
plan and returns a runner ``run(data) -> dmt``. The production operator adds its paths
(``production-brute``, ``production-subband`` and ``production-fast`` = sub-band on the
plan's decimated copy, :meth:`DMPlan.decimated`) by registering them here with
:func:`register_bench_path`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.operator import dedisperse
from drafts_ops.dedisp.plan import DMPlan, fixed_step_dm_trials
from drafts_ops.dedisp.prototype import dedisperse_prototype
from drafts_ops.dedisp.reference import dedisperse_reference

Runner = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class BenchConfig:
    """The benchmark problem; defaults are the standard FAST-like configuration.

    512 channels from 1500 MHz down to ~1001 MHz, tsamp 393.216 us, DM 0-2048 step 1
    (2049 trials), 16384 output samples, random 8-bit-range data (float32).
    """

    nchans: int = 512
    fch1: float = 1500.0
    foff: float = -500.0 / 512
    tsamp: float = 393.216e-6
    dm_min: float = 0.0
    dm_max: float = 2048.0
    dm_step: float = 1.0
    nout: int = 16384
    repeats: int = 3
    seed: int = 2024

    def __post_init__(self) -> None:
        if self.nchans < 1 or self.nout < 1 or self.repeats < 1 or not self.tsamp > 0:
            raise ParameterError(f"bad benchmark configuration {self}")

    def plan(self) -> DMPlan:
        freqs = self.fch1 + self.foff * np.arange(self.nchans)
        dms = fixed_step_dm_trials(self.dm_min, self.dm_max, self.dm_step)
        return DMPlan.build(dms, freqs, self.tsamp)

    def data(self, plan: DMPlan) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        shape = (self.nchans, self.nout + plan.max_delay)
        return rng.integers(0, 256, shape, dtype=np.uint8).astype(np.float32)


@dataclass(frozen=True)
class BenchPath:
    """One benchmarked path.

    Parameters
    ----------
    factory
        ``factory(plan) -> run``; ``run(data)`` returns the ``[ndm, nout]`` DM-time array.
    max_ndm
        Measure on at most this many DM trials (evenly spaced, keeping the largest) and
        scale the time to the full plan; for slow paths such as the numpy reference.
    warmup
        Run once before timing (JIT compilation), excluded from the figures.
    max_repeats
        Cap on timed repeats for this path.
    """

    factory: Callable[[DMPlan], Runner]
    max_ndm: int | None = None
    warmup: bool = True
    max_repeats: int | None = None
    description: str = ""


def _reference(plan: DMPlan) -> Runner:

    return lambda data: dedisperse_reference(data, plan.delays)


def _prototype(plan: DMPlan) -> Runner:

    return lambda data: dedisperse_prototype(data, plan)


def _production(
    algorithm: str, *, decimate: bool = False, eight_bit: bool = False
) -> Callable[[DMPlan], Runner]:
    def factory(plan: DMPlan) -> Runner:

        if decimate:  # the same DM trials, each at its Heimdall / DDplan time resolution
            plan = plan.decimated()

        out: list[np.ndarray] = []
        as_uint8: list[tuple[np.ndarray, np.ndarray]] = []  # (data, its uint8 copy), made once

        def run(data: np.ndarray) -> np.ndarray:
            if not out:  # the operator writes into one output array, reused across repeats
                out.append(np.empty((plan.ndm, data.shape[1] - plan.max_delay), np.float32))
            if eight_bit:
                if not as_uint8 or as_uint8[0][0] is not data:
                    as_uint8[:] = [(data, data.astype(np.uint8))]
                data = as_uint8[0][1]
            return dedisperse(data, plan, algorithm=algorithm, out=out[0])

        return run

    return factory


#: Benchmarked paths by name; ``prototype`` is the baseline of the ratios.
BENCH_PATHS: dict[str, BenchPath] = {
    "reference": BenchPath(
        _reference, max_ndm=32, warmup=False, max_repeats=1, description="numpy reference"
    ),
    "prototype": BenchPath(_prototype, description="direct-launched Numba kernel (CPU)"),
    "production-brute": BenchPath(
        _production("brute"), description="production operator, tiled brute force (CPU)"
    ),
    "production-subband": BenchPath(
        _production("subband"),
        description="production operator, two-stage sub-band at the same DM trials (CPU)",
    ),
    "production-subband-8bit": BenchPath(
        _production("subband", eight_bit=True),
        description="production operator, sub-band on the same samples as uint8: stage 1 "
        "in 16-bit integers, as the search runs it (CPU)",
    ),
    "production-fast": BenchPath(
        _production("subband", decimate=True),
        description="production operator, sub-band with per-DM time decimation (DMPlan."
        "decimated: Heimdall/DDplan rule) at the same DM trials (CPU)",
    ),
}
BASELINE = "prototype"


def register_bench_path(name: str, path: BenchPath) -> None:
    """Add (or replace) a benchmarked path."""
    BENCH_PATHS[name] = path


@dataclass
class BenchResult:
    """Figures of one path; ``seconds`` is for the full plan (scaled when ``scaled``)."""

    seconds: float
    ops_per_s: float
    realtime_factor: float
    speedup_vs_prototype: float | None = None
    ndm_measured: int = 0
    scaled: bool = False
    max_rel_diff_vs_prototype: float | None = None
    timings: list[float] = field(default_factory=list)


def _subset(plan: DMPlan, max_ndm: int | None) -> tuple[DMPlan, np.ndarray]:
    if max_ndm is None or plan.ndm <= max_ndm:
        return plan, np.arange(plan.ndm)
    rows = np.unique(np.linspace(0, plan.ndm - 1, max_ndm).round().astype(int))
    return DMPlan.build(plan.dms[rows], plan.freqs, plan.tsamp), rows


def run_bench(
    config: BenchConfig, names: list[str] | None = None
) -> tuple[dict[str, BenchResult], dict[str, Any]]:
    """Measure the named paths (default: all); returns results and a run description."""
    names = list(BENCH_PATHS) if names is None else names
    unknown = [n for n in names if n not in BENCH_PATHS]
    if unknown:
        raise ParameterError(f"unknown bench path(s) {unknown}; known: {list(BENCH_PATHS)}")
    plan = config.plan()
    data = config.data(plan)
    nout = data.shape[1] - plan.max_delay
    work = float(plan.nchan) * nout * plan.ndm
    results: dict[str, BenchResult] = {}
    outputs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in names:
        spec = BENCH_PATHS[name]
        sub, rows = _subset(plan, spec.max_ndm)
        run = spec.factory(sub)
        if spec.warmup:
            run(data)
        repeats = min(config.repeats, spec.max_repeats or config.repeats)
        timings = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = run(data)
            timings.append(time.perf_counter() - t0)
        seconds = statistics.median(timings) * plan.ndm / sub.ndm
        outputs[name] = (rows, out)
        results[name] = BenchResult(
            seconds=seconds,
            ops_per_s=work / seconds,
            realtime_factor=nout * config.tsamp / seconds,
            ndm_measured=sub.ndm,
            scaled=sub.ndm != plan.ndm,
            timings=timings,
        )
    _compare(results, outputs)
    return results, {"config": asdict(config), "ndm": plan.ndm, "max_delay": plan.max_delay}


def _compare(
    results: dict[str, BenchResult], outputs: dict[str, tuple[np.ndarray, np.ndarray]]
) -> None:
    if BASELINE not in results:
        return
    base_rows, base = outputs[BASELINE]
    base_s = results[BASELINE].seconds
    lookup = {int(r): i for i, r in enumerate(base_rows)}
    for name, result in results.items():
        result.speedup_vs_prototype = base_s / result.seconds
        rows, out = outputs[name]
        if all(int(r) in lookup for r in rows):
            ref = base[[lookup[int(r)] for r in rows]]
            scale = max(float(np.abs(ref).max()), 1e-30)
            result.max_rel_diff_vs_prototype = float(np.abs(out - ref).max() / scale)


def format_table(results: dict[str, BenchResult], meta: dict[str, Any]) -> str:
    """Human-readable benchmark report."""
    cfg = meta["config"]
    width = max(18, *(len(name) + 2 for name in results))
    lines = [
        f"dedispersion benchmark: {cfg['nchans']} channels from {cfg['fch1']:g} MHz "
        f"(foff {cfg['foff']:g} MHz), tsamp {cfg['tsamp'] * 1e6:g} us, "
        f"DM {cfg['dm_min']:g}-{cfg['dm_max']:g} step {cfg['dm_step']:g} ({meta['ndm']} trials), "
        f"{cfg['nout']} output samples (max delay {meta['max_delay']}), "
        f"median of up to {cfg['repeats']} repeats after warm-up",
        f"{'path':<{width}}{'seconds':>10}{'Gop/s':>9}{'realtime x':>12}{'vs prototype':>14}  note",
    ]
    for name, r in results.items():
        note = f"scaled from {r.ndm_measured} DMs" if r.scaled else ""
        if r.max_rel_diff_vs_prototype is not None and name != BASELINE:
            note += f"{'; ' if note else ''}max rel diff {r.max_rel_diff_vs_prototype:.1e}"
        speed = f"{r.speedup_vs_prototype:.2f}x" if r.speedup_vs_prototype else "-"
        lines.append(
            f"{name:<{width}}{r.seconds:>10.3f}{r.ops_per_s / 1e9:>9.2f}"
            f"{r.realtime_factor:>12.3f}{speed:>14}  {note}"
        )
    lines.append("ops = channels x output samples x DM trials; realtime x = observed s / wall s")
    return "\n".join(lines)


def results_json(results: dict[str, BenchResult]) -> dict[str, dict[str, Any]]:
    """One object keyed by path name (``timings`` left out)."""
    return {
        name: {k: v for k, v in asdict(r).items() if k != "timings"} for name, r in results.items()
    }
