"""Injection-recovery: completeness of a search on a user's own observation.

:func:`inject_file` adds simulated bursts (the simulator's footprints: exact dispersion,
in-channel smearing, Gaussian profiles at a target matched-filter S/N) to a real
observation, scaled by each channel's measured noise, so they sit in its real noise,
bandpass and RFI; it writes a new SIGPROC file and a truth table (the original is never
touched). :func:`completeness` searches it with the user's options, matches candidates to
the injected bursts and says, for each missed one, why: outside the searched range, merged
into another candidate, or below the threshold.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from drafts_ops.core.atomic import atomic_path, write_json_atomic, write_text_atomic
from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.plan import dispersion_delay_s
from drafts_ops.detect.preprocess import robust_location_scale
from drafts_ops.evaluation.causes import miss_reason
from drafts_ops.evaluation.matching import Band, InjectedBurst, match_candidates
from drafts_ops.io import open_observation, write_observation
from drafts_ops.io.header import Header
from drafts_ops.search import SearchConfig, run_search
from drafts_ops.simulate.burst import BurstSpec, RenderedBurst
from drafts_ops.simulate.truth import write_truth

#: S/N, DM and width bins of the completeness tables.
SNR_BINS = (0.0, 6.0, 8.0, 10.0, 12.0, 15.0, 20.0, 30.0, np.inf)
#: Samples per channel from which a file's noise is measured (strided over the file).
NOISE_SAMPLES = 65536


@dataclass(frozen=True)
class InjectionPlan:
    """What to inject: ``n_bursts`` with S/N, DM (pc cm^-3) and FWHM (s) drawn uniformly
    (width log-uniformly) from the ranges, at times spread over the file, seeded."""

    n_bursts: int = 40
    snr: tuple[float, float] = (5.0, 20.0)
    dm: tuple[float, float] = (50.0, 1000.0)
    width_s: tuple[float, float] = (0.5e-3, 8e-3)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("snr", "dm", "width_s"):
            lo, hi = getattr(self, name)
            if not 0 <= lo <= hi or (name != "dm" and lo <= 0):
                raise ParameterError(f"injection {name} range {lo}..{hi} is impossible")
        if self.n_bursts < 1:
            raise ParameterError(f"n_bursts = {self.n_bursts} must be >= 1")

    def draw(self, header: Header) -> list[BurstSpec]:
        """Bursts whose whole sweep fits in the file, in time slots of equal length (so
        that they do not overlap), in random order of S/N, DM and width."""
        rng = np.random.default_rng(self.seed)
        dms = rng.uniform(*self.dm, self.n_bursts)
        sweeps = dispersion_delay_s(dms, header.fmin, header.fmax)
        usable = header.tobs - float(sweeps.max()) - 0.05 * header.tobs
        if usable <= 0:
            raise ParameterError(
                f"{header.tobs:.2f} s of data cannot hold a burst at DM {self.dm[1]:g} "
                f"(sweep {float(sweeps.max()):.2f} s); lower the DM range"
            )
        slot = usable / self.n_bursts
        jitter = rng.uniform(0.2, 0.8, self.n_bursts)
        starts = 0.025 * header.tobs + slot * (np.arange(self.n_bursts) + jitter)
        widths = np.exp(rng.uniform(*np.log(self.width_s), self.n_bursts))
        snrs = rng.uniform(*self.snr, self.n_bursts)
        return [BurstSpec(t_s=float(t), dm=float(d), snr=float(s), width_s=float(w))
                for t, d, s, w in zip(starts, dms, snrs, widths, strict=True)]  # fmt: skip


def channel_noise(reader, samples: int = NOISE_SAMPLES) -> tuple[np.ndarray, np.ndarray]:
    """Median and robust rms (MAD) of each channel, from up to ``samples`` spectra spread
    over the file, in file units (``[nchan]`` each)."""

    h = reader.header
    pieces = max(1, min(16, h.nsamples // 1024))
    span = max(1, min(samples // pieces, h.nsamples // pieces))
    starts = np.linspace(0, h.nsamples - span, pieces).astype(int)
    data = np.concatenate([reader.read_block(int(s), span) for s in starts], axis=1)
    med, rms = robust_location_scale(data, "mad", axis=1, dtype=np.float64)
    std = data.std(axis=1)
    return med, np.where(rms > 0, rms, std)


def inject_file(path: str | Path, out_path: str | Path, plan: InjectionPlan,
                block_nsamp: int = 65536) -> tuple[Path, list[RenderedBurst]]:  # fmt: skip
    """Write ``out_path`` (SIGPROC): ``path`` plus the bursts of ``plan``, each channel's
    signal scaled by that channel's measured rms, and ``<out>.truth.csv``."""
    with open_observation(path) as reader:
        header = reader.header
        _, rms = channel_noise(reader)
        rendered = [RenderedBurst.render(header.chan_freqs, header.tsamp, b)
                    for b in plan.draw(header)]  # fmt: skip
        scale = rms.astype(np.float32)[:, None]

        def blocks() -> Iterator[np.ndarray]:
            for start, data in reader.iter_blocks(block_nsamp):
                n = data.shape[1]
                for burst in rendered:
                    lo, hi = burst.span
                    if hi > start and lo < start + n:
                        np.add(data, burst.dense(start, n) * scale, out=data)
                yield data

        out = write_observation(Path(out_path), header.replace(nifs=1), blocks())
    rows = [{"kind": "burst", "tcand_s": r.spec.t_s, "dm": r.spec.dm, "width_s": r.spec.width_s,
             "snr": r.spec.snr, "boxcar_width_s": r.boxcar_width * header.tsamp,
             "peak_sigma": float(r.profile.max())} for r in rendered]  # fmt: skip
    write_truth(Path(out_path).with_suffix(".truth.csv"), rows)
    return out, rendered


@dataclass
class Completeness:
    """Injected bursts, what the search found, and why it missed the others."""

    file: str
    injected_file: str
    searched_dm: tuple[float, float]
    bursts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return float(np.mean([b["found"] for b in self.bursts])) if self.bursts else float("nan")

    def table(self, key: str, edges: Sequence[float]) -> list[dict[str, Any]]:
        """Recall per bin of ``key`` (``snr``, ``dm``, ``width_ms``)."""
        rows = []
        for lo, hi in itertools.pairwise(edges):
            inside = [b for b in self.bursts if lo <= b[key] < hi]
            if inside:
                found = sum(b["found"] for b in inside)
                rows.append({"lo": lo, "hi": hi, "n": len(inside), "found": found,
                             "recall": found / len(inside)})  # fmt: skip
        return rows

    def missed(self) -> list[dict[str, Any]]:
        return [b for b in self.bursts if not b["found"]]


def completeness(path: str | Path, out_dir: str | Path, plan: InjectionPlan,
                 config: Any = None) -> Completeness:  # fmt: skip
    """Inject ``plan`` into ``path``, search the result into ``out_dir/search`` with
    ``config`` (:class:`~drafts_ops.search.SearchConfig`) and score it."""

    out = Path(out_dir)
    injected, rendered = inject_file(path, out / f"{Path(path).stem}.injected.fil", plan)
    result = run_search(injected, out / "search", config or SearchConfig())
    dms = np.asarray(result.plan.dms)
    h = result.plan.header
    band = Band.of(h)
    truth = [InjectedBurst(t_s=r.spec.t_s, dm=r.spec.dm, snr=r.spec.snr, width_s=r.spec.width_s,
                           boxcar_width_s=r.boxcar_width * h.tsamp) for r in rendered]  # fmt: skip
    cands = result.candidates
    matches = match_candidates(truth, cands, band, dms)
    report = Completeness(str(path), str(injected), (float(dms[0]), float(dms[-1])))
    for i, burst in enumerate(truth):
        entry = {"t_s": burst.t_s, "dm": burst.dm, "snr": burst.snr,
                 "width_ms": burst.width_s * 1e3, "found": bool(matches.found[i])}  # fmt: skip
        if matches.found[i]:
            best = cands[int(matches.best[i])]
            entry.update(found_snr=best.snr, found_dm=best.dm, found_t_s=best.tcand_s)
        else:
            entry["reason"] = miss_reason(burst, i, band, dms, cands, matches.owner, truth)
        report.bursts.append(entry)
    return report


def write_report(report: Completeness, out_dir: str | Path) -> dict[str, Path]:
    """``completeness.json``, ``completeness.md`` and ``completeness.png`` in ``out_dir``."""
    out = Path(out_dir)
    doc = {**asdict(report), "recall": report.recall,
           "by_snr": report.table("snr", SNR_BINS),
           "by_dm": report.table("dm", _edges(report, "dm", 5)),
           "by_width_ms": report.table("width_ms",
                                       _edges(report, "width_ms", 4, log=True))}  # fmt: skip
    paths = {"json": write_json_atomic(out / "completeness.json", doc)}
    paths["md"] = write_text_atomic(out / "completeness.md", _markdown(report, doc))
    paths["png"] = _plot(doc, out / "completeness.png")
    return paths


def _edges(report: Completeness, key: str, n: int, log: bool = False) -> list[float]:
    values = np.array([b[key] for b in report.bursts], np.float64)
    lo, hi = float(values.min()), float(values.max()) * (1 + 1e-9)
    edges = np.geomspace(lo, hi, n + 1) if log and lo > 0 else np.linspace(lo, hi, n + 1)
    return [float(e) for e in edges]


def _markdown(report: Completeness, doc: dict[str, Any]) -> str:
    lines = [f"# Completeness of the search on `{Path(report.file).name}`", "",
             f"{len(report.bursts)} bursts injected into the file's own noise "
             f"(`{Path(report.injected_file).name}`); searched DM "
             f"{report.searched_dm[0]:g}-{report.searched_dm[1]:.0f} pc cm^-3; "
             f"recall {report.recall:.2f}.", ""]  # fmt: skip
    for title, key, unit in (("injected S/N", "by_snr", ""), ("DM", "by_dm", " pc cm^-3"),
                             ("width", "by_width_ms", " ms")):  # fmt: skip
        lines += [f"| {title}{unit} | bursts | found | recall |", "|---|---|---|---|"]
        lines += [f"| {r['lo']:.3g}-{r['hi']:.3g} | {r['n']} | {r['found']} | {r['recall']:.2f} |"
                  for r in doc[key]]  # fmt: skip
        lines.append("")
    missed = report.missed()
    lines += [f"## Missed bursts ({len(missed)})", ""]
    lines += [f"- t = {b['t_s']:.3f} s, DM {b['dm']:.0f}, S/N {b['snr']:.1f}, width "
              f"{b['width_ms']:.2f} ms: {b['reason']}" for b in missed] or ["none"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _plot(doc: dict[str, Any], path: Path) -> Path:
    # lazy: matplotlib takes ~0.5 s to import
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.2))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3, sharey=True)
    for ax, (key, label) in zip(axes, (("by_snr", "injected S/N"), ("by_dm", "DM (pc cm$^{-3}$)"),
                                       ("by_width_ms", "width (ms)")), strict=True):  # fmt: skip
        rows = [r for r in doc[key] if np.isfinite(r["hi"])]
        centres = [0.5 * (r["lo"] + r["hi"]) for r in rows]
        ax.plot(centres, [r["recall"] for r in rows], marker="o")
        ax.set_xlabel(label)
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("recall")
    fig.suptitle(f"completeness: recall {doc['recall']:.2f} of {len(doc['bursts'])} injected")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=80)
    return path
