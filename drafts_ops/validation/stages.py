"""The validation as stage functions: plan → run each path → detect → evaluate → report.

The Prefect flow (``flows/validate.py``) wraps each stage in a task; stages exchange file
paths and small records. :func:`~drafts_ops.validation.run.validate_files` runs the same
stages without Prefect.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.core.hardware import platform_info
from drafts_ops.dedisp.ddplan import plan_ranges
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.io import open_observation
from drafts_ops.io.header import Header
from drafts_ops.validation import agreement as agr
from drafts_ops.validation import verdict as vd
from drafts_ops.validation.config import DelayFault, ValidationConfig
from drafts_ops.validation.parity import Localisation, Parity, compare_outputs, locate_differences
from drafts_ops.validation.plots import file_plots
from drafts_ops.validation.runner import (
    BASELINE,
    PathRun,
    make_runner,
    overlap_for,
    path_name,
    path_plan,
    probe_data,
    production_algorithms,
    stream_path,
)


@dataclass(frozen=True)
class FilePlan:
    """What validating one file, or one DM range of it, involves (small and picklable).

    ``header`` is the range's: the file's sample time times ``factor`` (samples averaged
    as the search averages them in that range), its sample count divided by it.
    """

    file: str
    header: Header
    dms: tuple[float, ...]
    overlap: int
    paths: tuple[str, ...]
    config: ValidationConfig
    work_dir: str
    factor: int = 1
    #: Whether this is the file's first (or only) DM range: the one a delay fault breaks.
    first: bool = True
    #: Whether the file is validated in several DM ranges (their labels then say which).
    ranged: bool = False

    def dm_plan(self) -> DMPlan:
        return DMPlan.build(np.asarray(self.dms), self.header.chan_freqs, self.header.tsamp)

    @property
    def fault(self) -> DelayFault | None:
        """The deliberate delay fault of this range (the first range only)."""
        return self.config.delay_fault if self.first else None

    @property
    def label(self) -> str:
        """The file, and its DM range where it has several."""
        if not self.ranged:
            return self.file
        return (f"{self.file} [DM {self.dms[0]:.1f}-{self.dms[-1]:.1f}, "
                f"{self.factor} sample{'s' if self.factor > 1 else ''} averaged]")  # fmt: skip


def file_ranges(header: Header, config: ValidationConfig) -> list[tuple[int, np.ndarray]]:
    """``(factor, trials)`` of each DM range to validate: the search's ranges
    (:func:`~drafts_ops.dedisp.ddplan.plan_ranges`) or one plan at the file's resolution
    (``dm_ranges`` off, or a fixed ``dm_step``)."""
    if config.dm_ranges and config.dm_step is None:
        ranges = plan_ranges(config.dm_min, config.dm_max, tsamp=header.tsamp,
                             fch1=header.fch1, foff=header.foff, nchans=header.nchans,
                             dm_tol=config.dm_tol)  # fmt: skip
        return [(r.factor, np.asarray(r.dms)) for r in ranges]
    plan = DMPlan.from_header(header, config.dm_min, config.dm_max, config.dm_step,
                              dm_tol=config.dm_tol)  # fmt: skip
    return [(1, plan.dms)]


def plan_file(file: str | Path, config: ValidationConfig,
              work_dir: str | Path) -> list[FilePlan]:  # fmt: skip
    """Read the header, build each DM range's plan and choose the paths to run."""
    with open_observation(file) as reader:
        header = reader.header
    registered = production_algorithms(config.backend)
    wanted = config.algorithms if config.algorithms is not None else registered
    unknown = [a for a in wanted if a not in registered]
    if unknown or not wanted:
        raise ParameterError(
            f"production algorithm(s) {unknown or '(none)'} not available for backend "
            f"{config.backend!r}; registered: {', '.join(registered) or 'none'}"
        )
    paths = (BASELINE, *(path_name(a) for a in wanted))
    ranges = file_ranges(header, config)
    nsamp = header.nsamples if config.max_samples is None else min(config.max_samples,
                                                                   header.nsamples)  # fmt: skip
    plans = []
    for k, (factor, dms) in enumerate(ranges):
        h = replace(header, tsamp=header.tsamp * factor, nsamples=header.nsamples // factor)
        plan = DMPlan.build(np.asarray(dms, np.float64), h.chan_freqs, h.tsamp)
        overlap = overlap_for(plan, config.delay_fault if k == 0 else None)
        if nsamp // factor <= overlap:
            raise ParameterError(
                f"{file}: {nsamp} samples is not more than the maximum dispersion delay "
                f"{overlap * factor} samples (DM {plan.dms[-1]:g}); lower --dm-max"
            )
        work = Path(work_dir) / Path(file).stem / (f"range-{k}" if len(ranges) > 1 else "")
        plans.append(FilePlan(str(file), h, tuple(float(d) for d in plan.dms), overlap, paths,
                              config, str(work), factor, k == 0, len(ranges) > 1))  # fmt: skip
    return plans


def run_path(fplan: FilePlan, name: str) -> PathRun:
    """Stream the file (its range's averages) through path ``name``; the DM–time array
    goes to the work dir."""
    cfg = fplan.config
    return stream_path(
        fplan.file, fplan.dm_plan(), name,
        Path(fplan.work_dir) / f"{name.replace('/', '-')}.dmt.npy",
        block_size=cfg.block_size, overlap=fplan.overlap, max_samples=cfg.max_samples,
        backend=cfg.backend, fault=fplan.fault, repeats=cfg.repeats, factor=fplan.factor,
    )  # fmt: skip


def detect(fplan: FilePlan, run: PathRun) -> agr.Detection:
    """Classical search of one path's output."""
    return agr.detect_path(run, fplan.dm_plan(), fplan.config, fplan.work_dir, fplan.file)


@dataclass
class FileResult:
    """Everything the report shows for one file (JSON-ready through :meth:`to_dict`)."""

    file: str
    label: str
    factor: int
    header: dict[str, Any]
    plan: dict[str, Any]
    dms: list[float]
    block_size: int
    overlap: int
    paths: list[str]
    parity: list[Parity]
    probe: list[Parity]
    localisation: list[Localisation]
    bursts: list[dict[str, Any]]
    snr_vs_dm: dict[str, Any] | None
    agreement: list[agr.Agreement]
    performance: list[dict[str, Any]]
    candidates: dict[str, int]
    verdict: list[vd.VerdictLine]
    plots: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def passed(self) -> bool:
        return all(line.passed for line in self.verdict)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "plots"}
        for key in ("parity", "probe", "localisation", "agreement", "verdict"):
            out[key] = [item.to_dict() for item in out[key]]
        out["passed"] = self.passed
        return out


def evaluate(
    fplan: FilePlan, runs: dict[str, PathRun], detections: dict[str, agr.Detection]
) -> FileResult:
    """Parity, localisation, S/N at bursts, candidate agreement, performance and verdict."""
    cfg, t = fplan.config, fplan.config.thresholds
    plan = fplan.dm_plan()
    base = runs[BASELINE].load()
    production = [p for p in fplan.paths if p != BASELINE]
    parity = {p: compare_outputs(p, base, runs[p].load(), plan, t.exact_max_rel_diff)
              for p in production}  # fmt: skip
    probe, locs = _probe(fplan, plan, [p for p in production if vd.is_exact(p)], parity)
    bursts, snr_dm = _bursts(fplan, plan, detections)
    agreements = [
        agr.match_candidates(p, detections[BASELINE].candidates, detections[p].candidates,
                             plan, t)
        for p in production
    ]  # fmt: skip
    lines: list[vd.VerdictLine] = []
    for p, a in zip(production, agreements, strict=True):
        if vd.is_exact(p):
            lines += vd.parity_lines(fplan.label, parity[p], probe.get(p), t)
        else:
            losses = [b["replica_loss"][p] for b in bursts]
            lines.append(vd.snr_loss_line(fplan.label, p, losses, t))
        lines.append(vd.agreement_line(fplan.label, a, t))
        if p in locs:
            lines.append(vd.localisation_line(fplan.label, p, locs[p]))
    h = fplan.header
    return FileResult(
        file=fplan.file,
        label=fplan.label,
        factor=fplan.factor,
        header={
            "nchans": h.nchans,
            "nsamples": h.nsamples,
            "tsamp_s": h.tsamp,
            "fch1_mhz": h.fch1,
            "foff_mhz": h.foff,
            "nbits": h.nbits,
            "tobs_s": h.tobs,
        },
        plan=plan.summary(),
        dms=list(fplan.dms),
        block_size=cfg.block_size,
        overlap=fplan.overlap,
        paths=list(fplan.paths),
        parity=list(parity.values()),
        probe=list(probe.values()),
        localisation=list(locs.values()),
        bursts=bursts,
        snr_vs_dm=snr_dm,
        agreement=agreements,
        performance=performance_rows(runs, detections, plan.tsamp),
        candidates={p: len(d.candidates) for p, d in detections.items()},
        verdict=lines,
    )


def _probe(fplan: FilePlan, plan: DMPlan, exact: list[str], parity: dict[str, Parity]):
    """Random-data parity of exact paths; localisation of any that differ anywhere."""
    cfg = fplan.config
    nout = cfg.probe_samples
    data = probe_data(plan, fplan.overlap, nout)
    reference = make_runner(BASELINE, plan, cfg.backend)
    ref_out = reference(data)[:, :nout]
    probes, locs = {}, {}
    for p in exact:
        runner = make_runner(p, path_plan(plan, p, fplan.fault), cfg.backend)
        probes[p] = compare_outputs(p, ref_out, runner(data)[:, :nout], plan,
                                    cfg.thresholds.exact_max_rel_diff)  # fmt: skip
        if probes[p].max_abs_diff > 0 or parity[p].max_rel_diff > cfg.thresholds.exact_max_rel_diff:
            locs[p] = locate_differences(p, reference, runner, plan, data, nout=nout)
    return probes, locs


def _bursts(fplan: FilePlan, plan: DMPlan, detections: dict[str, agr.Detection]):
    """S/N of every path at each burst, and S/N against DM at the first (brightest) one."""
    t = fplan.config.thresholds
    found = agr.truth_bursts(fplan.file)
    if found is None:
        found = agr.detected_bursts(detections[BASELINE].candidates, t)
    cfg = fplan.config
    runners = {p: make_runner(p, path_plan(plan, p, fplan.fault), cfg.backend)
               for p in fplan.paths}  # fmt: skip
    rows, kept = [], []
    for burst in found:
        snr = {p: agr.snr_at(d, plan, burst, t) for p, d in detections.items()}
        if snr[BASELINE] is None:  # outside the validated DM range or time span
            continue
        ref = snr[BASELINE]["snr"]
        loss = {p: (1.0 - s["snr"] / ref if s is not None and ref > 0 else None)
                for p, s in snr.items() if p != BASELINE}  # fmt: skip
        replica = {
            p: agr.replica_loss(runners[BASELINE], runners[p], plan, burst, overlap=fplan.overlap)
            for p in fplan.paths
            if p != BASELINE
        }
        rows.append({**burst.to_dict(), "snr": snr, "loss": loss, "replica_loss": replica})
        kept.append(burst)
    if not rows:
        return rows, None
    first = kept[0]
    curves = {p: agr.snr_vs_dm(d, plan, first, t) for p, d in detections.items()}
    return rows, {"burst": first.to_dict(), "dms": list(fplan.dms), "snr": curves}


def performance_rows(
    runs: dict[str, PathRun], detections: dict[str, agr.Detection], tsamp: float
) -> list[dict[str, Any]]:
    """Per path: stage wall times (s), throughput, real-time factors, memory, speed-up."""
    base = runs[BASELINE].dedisperse_s
    rows = []
    for name, run in runs.items():
        detect_s = detections[name].detect_s if name in detections else 0.0
        seconds = run.nout * tsamp
        total = run.read_s + run.dedisperse_s + detect_s
        dedisp = max(run.dedisperse_s, 1e-12)
        rows.append({
            "path": name, "nblocks": run.nblocks, "warmup_s": run.warmup_s,
            "read_s": run.read_s, "dedisperse_s": run.dedisperse_s, "detect_s": detect_s,
            "total_s": total, "cells": run.cells, "cells_per_s": run.cells / dedisp,
            "samples_per_s": run.nout / dedisp, "realtime_factor": seconds / dedisp,
            "realtime_factor_total": seconds / total if total > 0 else None,
            "peak_mib": run.peak_mib, "speedup_vs_prototype": base / dedisp,
        })  # fmt: skip
    return rows


@dataclass
class ValidationReport:
    """A whole validation: the files' results, configuration and the machine."""

    files: list[FileResult]
    config: dict[str, Any]
    platform: dict[str, Any]
    created_utc: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    )

    @property
    def passed(self) -> bool:
        return bool(self.files) and all(f.passed for f in self.files)

    @property
    def verdict(self) -> list[vd.VerdictLine]:
        return [line for f in self.files for line in f.verdict]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "drafts-ops/validation",
            "schema_version": 1,
            "created_utc": self.created_utc,
            "passed": self.passed,
            "config": self.config,
            "platform": self.platform,
            "files": [f.to_dict() for f in self.files],
        }


def validate_file(
    file: str | Path, config: ValidationConfig, work_dir: str | Path, *, plots: bool = True
) -> list[FileResult]:
    """Every stage for one file, each DM range in sequence (figures unless
    ``plots=False``)."""

    results = []
    for fplan in plan_file(file, config, work_dir):
        runs = {p: run_path(fplan, p) for p in fplan.paths}
        detections = {p: detect(fplan, r) for p, r in runs.items()}
        result = evaluate(fplan, runs, detections)
        if plots:
            result.plots = file_plots(runs, result)
        results.append(result)
    return results


def build_report(results: list[FileResult], config: ValidationConfig) -> ValidationReport:

    return ValidationReport(list(results), config.to_dict(), platform_info())
