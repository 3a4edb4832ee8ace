"""The CPU peers on the benchmark's files: TransientX run by the scripts of a peers
directory (``../shared/peers/`` in the development workplace: they build it from its
public repository), timed and scored as the search is.

Nothing here is needed to search; ``drafts bench search --peers DIR`` runs a peer only
where its script and its build are found, and says so where they are not.
"""

from __future__ import annotations

import csv
import os
import resource
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from drafts_ops.bench.search import (
    bench_configs,
    bench_data_dir,
    observation_file,
    recall,
    timed_run,
)
from drafts_ops.simulate.truth import truth_path

#: Where the peers' setup script installs TransientX.
TRANSIENTX_PREFIX = Path("/opt/peers/transientx")


@dataclass
class PeerFigures:
    """One peer's run on one benchmark file."""

    config: str
    peer: str
    threads: int
    process_wall_s: float
    cpu_s: float
    peak_rss_mib: float
    candidates: int
    found: int
    injected: int
    duration_s: float

    @property
    def process_realtime_factor(self) -> float:
        return self.duration_s / self.process_wall_s if self.process_wall_s else 0.0


def transientx_available(peers_dir: Path) -> str | None:
    """Why TransientX cannot run from ``peers_dir`` (``None``: it can)."""
    if not (Path(peers_dir) / "run-transientx.sh").is_file():
        return f"{peers_dir}: no run-transientx.sh"
    if not (TRANSIENTX_PREFIX / "bin" / "transientx_fil").is_file():
        return f"TransientX is not built in {TRANSIENTX_PREFIX} (see {peers_dir}/README.md)"
    return None


def run_peers(
    names: list[str], peers_dir: Path, *, data_dir: Path | None = None,
    duration_s: float | None = None, dm_max: float | None = None, threads: int = 2,
) -> tuple[list[PeerFigures], list[str]]:  # fmt: skip
    """TransientX on each named configuration's observation (the files the search was
    benchmarked on); ``(figures, notes)``, a note where it cannot run."""
    why = transientx_available(peers_dir)
    if why is not None:
        return [], [f"TransientX not run: {why}"]
    data = bench_data_dir(data_dir)
    figures = []
    for config in bench_configs(names, duration_s=duration_s, dm_max=dm_max):
        path = observation_file(config, data)
        with tempfile.TemporaryDirectory(dir=data) as out:
            wall, cpu, rss, cands = run_transientx(path, config.dm_max, peers_dir, Path(out),
                                                   threads=threads)  # fmt: skip
        found, injected = recall(truth_path(path), cands)
        figures.append(PeerFigures(config.name, "TransientX", threads, wall, cpu, rss,
                                   len(cands), found, injected, config.duration_s))  # fmt: skip
    return figures, []


def run_transientx(path: Path, dm_max: float, peers_dir: Path, out: Path, *,
                   threads: int = 2) -> tuple[float, float, float, list[Any]]:  # fmt: skip
    """Run TransientX on ``path`` (DM 0 to ``dm_max``) with ``threads`` threads through the
    peers' script; ``(process wall s, CPU s, peak RSS MiB, candidates)`` with each candidate's
    ``tcand_s`` and ``dm`` (the top of the band, as the search reports them)."""
    script = Path(peers_dir) / "run-transientx.sh"
    env = {**os.environ, "NTHREADS": str(threads)}
    timer = shutil.which("time", path="/usr/bin:/bin")
    report = out / "peer-time.txt"
    cmd = ["bash", str(script), str(path), f"{dm_max:g}", str(out)]
    if timer:  # GNU time: the script's own CPU and peak RSS
        cmd = [timer, "-f", "%U %S %M", "-o", str(report), *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed_run(cmd, env, f"TransientX on {path}")
    if timer:
        user, system, rss_kib = (float(x) for x in report.read_text().split()[-3:])
        cpu = user + system
    else:  # the children's counters (peak RSS: the largest child so far)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        rss_kib = float(after.ru_maxrss)
    with (out / "candidates.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    cands = [SimpleNamespace(tcand_s=float(r["time_s"]), dm=float(r["dm"])) for r in rows]
    return wall, cpu, rss_kib / 1024, cands


def peer_json(figures: list[PeerFigures]) -> list[dict[str, Any]]:
    return [{**asdict(f), "process_realtime_factor": f.process_realtime_factor} for f in figures]


def format_peers(figures: list[PeerFigures], ours: list[Any]) -> str:
    """The peers beside the search's flow runs of the same files (process figures)."""
    head = (f"{'config':<15}{'search':<22}{'proc s':>8}{'pRTF':>7}{'cpu s':>8}{'RSS MiB':>9}"
            f"{'cands':>7}{'recall':>8}")  # fmt: skip
    lines = [head]
    for f in figures:
        mine = [r for r in ours if r.config == f.config and r.path == "flow"]
        for r in mine:
            lines.append(f"{r.config:<15}{'drafts-ops ' + r.mode:<22}{r.process_wall_s:8.1f}"
                         f"{r.process_realtime_factor:7.2f}{r.cpu_s:8.1f}{r.peak_rss_mib:9.0f}"
                         f"{r.candidates:7d}{f'{r.found}/{r.injected}':>8}")  # fmt: skip
        lines.append(f"{f.config:<15}{f'{f.peer} ({f.threads} thr)':<22}{f.process_wall_s:8.1f}"
                     f"{f.process_realtime_factor:7.2f}{f.cpu_s:8.1f}{f.peak_rss_mib:9.0f}"
                     f"{f.candidates:7d}{f'{f.found}/{f.injected}':>8}")  # fmt: skip
        for r in mine:
            if r.process_wall_s:
                lines.append(f"{f.config}: {f.peer} / drafts-ops {r.mode} process wall = "
                             f"{f.process_wall_s / r.process_wall_s:.2f}")  # fmt: skip
    lines.append("drafts-ops' cpu s and RSS are its search's (perf.json); the peer's from "
                 "/usr/bin/time of its whole script")  # fmt: skip
    return "\n".join(lines)
