"""``drafts bench dedisp`` (every dedispersion path on one configuration) and ``drafts bench
search`` (the whole search on survey-sized simulated observations)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="performance benchmarks")
    targets = p.add_subparsers(dest="target", metavar="TARGET", required=True)
    d = targets.add_parser(
        "dedisp",
        help="dedispersion paths on the FAST-like configuration (or other shapes)",
        description="Wall time (median of repeats after a warm-up), throughput in "
        "channel*sample*DM per second, real-time factor and ratio to the prototype.",
    )
    d.add_argument("--json", action="store_true", help="print one JSON object keyed by path")
    d.add_argument("--nchans", type=int, default=512)
    d.add_argument("--fch1", type=float, default=1500.0, help="first channel, MHz")
    d.add_argument("--foff", type=float, default=-500.0 / 512, help="channel step, MHz")
    d.add_argument("--tsamp", type=float, default=393.216e-6, help="sampling time, s")
    d.add_argument("--dm-min", type=float, default=0.0)
    d.add_argument("--dm-max", type=float, default=2048.0)
    d.add_argument("--dm-step", type=float, default=1.0)
    d.add_argument("--nout", type=int, default=16384, help="output samples")
    d.add_argument("--repeats", type=int, default=3)
    d.add_argument("--paths", nargs="+", default=None, help="paths to run (default: all)")
    d.set_defaults(func=run)
    _add_search_parser(targets)


def _add_search_parser(targets) -> None:
    # lazy: keeps drafts --help fast
    from drafts_ops.bench.search import CONFIGS, MODES, PATHS

    shapes = "; ".join(
        f"{n}: {c.nchans} ch, {c.tsamp * 1e6:g} us, {c.duration_s:g} s"
        + (f", x{c.time_decimation} t x{c.freq_decimation} f" if c.time_decimation > 1 else "")
        for n, c in CONFIGS.items()
    )
    s = targets.add_parser(
        "search",
        help="the whole search (direct and Prefect flow) on survey-sized simulated data",
        description="Simulate each configuration once (cached in --data-dir), search it in a "
        "fresh process per run along each path and dedispersion mode, and print per stage "
        "wall seconds, CPU, real-time factor, peak RSS and candidates beside the "
        "dedispersion kernel's own real-time factor on the same plan (pipeline/kernel "
        f"ratio), the process wall from start to exit, the recall of the injected bursts and "
        f"the plan's modelled S/N loss. Configurations: {shapes}.",
    )
    s.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS),
                   help="configurations to run (default: all)")  # fmt: skip
    s.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS),
                   help="direct (no Prefect) and/or flow (drafts search)")  # fmt: skip
    s.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES),
                   help="dedispersion modes (default: both)")  # fmt: skip
    s.add_argument("--duration", type=float, default=None, help="observation length, s")
    s.add_argument("--dm-max", type=float, default=None, help="highest DM, pc cm^-3")
    s.add_argument("--memory-budget-mib", type=float, default=None,
                   help="search memory budget, MiB (default: the search's)")  # fmt: skip
    s.add_argument("--detector", choices=("classical", "ml", "both"), default=None,
                   help="search detector (default: the search's, classical)")  # fmt: skip
    s.add_argument("--search-subbands", type=int, default=None,
                   help="also search this many sub-bands alone (default 1: off)")  # fmt: skip
    s.add_argument("--detector-subbands", type=int, default=None,
                   help="the detector also sees this many sub-bands (default 1)")  # fmt: skip
    s.add_argument("--data-dir", type=Path, default=None,
                   help="observations kept here (default: TMPDIR/drafts-bench)")  # fmt: skip
    s.add_argument("--peers", type=Path, default=None, metavar="DIR",
                   help="also run TransientX (2 threads) on the same files with the scripts in "
                   "DIR (run-transientx.sh; built by its setup-peers.sh) where it is "
                   "installed")  # fmt: skip
    s.add_argument("--json", action="store_true", help="print a JSON list, one object per run")
    s.set_defaults(func=run_search_bench)


def run_search_bench(args: argparse.Namespace) -> int:
    # lazy: keeps drafts --help fast
    from drafts_ops.bench.search import format_table, results_json, run_search_bench
    from drafts_ops.core.hardware import platform_info

    extra = {}
    for name in ("memory_budget_mib", "detector", "search_subbands", "detector_subbands"):
        if getattr(args, name):
            extra[name] = getattr(args, name)
    results = run_search_bench(args.configs, paths=tuple(args.paths), modes=tuple(args.modes),
                               data_dir=args.data_dir, duration_s=args.duration,
                               dm_max=args.dm_max, extra=extra)  # fmt: skip
    peers, notes = [], []
    if args.peers is not None:
        from drafts_ops.bench.peers import format_peers, peer_json, run_peers

        peers, notes = run_peers(args.configs, args.peers, data_dir=args.data_dir,
                                 duration_s=args.duration, dm_max=args.dm_max)  # fmt: skip
    if args.json:
        doc = results_json(results)
        print(json.dumps(doc if args.peers is None else
                         {"runs": doc, "peers": peer_json(peers), "notes": notes},
                         indent=2))  # fmt: skip
        return 0
    info = platform_info()
    print(format_table(results))
    if peers:
        print(format_peers(peers, results))
    for note in notes:
        print(f"note: {note}")
    print(f"platform: {info['cores']} cores ({info['cpu']}, {info['simd']}), "
          f"numba threads {info['numba_threads']}")  # fmt: skip
    return 0


def run(args: argparse.Namespace) -> int:
    # lazy: keeps drafts --help fast
    from drafts_ops.bench.dedisp import BenchConfig, format_table, results_json, run_bench
    from drafts_ops.core.hardware import platform_info

    config = BenchConfig(
        nchans=args.nchans,
        fch1=args.fch1,
        foff=args.foff,
        tsamp=args.tsamp,
        dm_min=args.dm_min,
        dm_max=args.dm_max,
        dm_step=args.dm_step,
        nout=args.nout,
        repeats=args.repeats,
    )
    results, meta = run_bench(config, args.paths)
    if args.json:
        print(json.dumps(results_json(results), indent=2))
    else:
        info = platform_info()
        print(format_table(results, meta))
        print(
            f"platform: {info['cores']} cores ({info['cpu']}, {info['simd']}), "
            f"numba {info['numba_version']} threads {info['numba_threads']} "
            f"layer {info['threading_layer']}, GPU {info['gpu']}"
        )
    return 0
