"""``drafts bench dedisp``: time every dedispersion path on one configuration."""

from __future__ import annotations

import argparse
import json


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


def run(args: argparse.Namespace) -> int:
    from drafts_ops.bench import BenchConfig, format_table, results_json, run_bench
    from drafts_ops.platform import platform_info

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
