"""``drafts inject FILE... --out DIR``: completeness of the search on your own data."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inject",
        help="inject simulated bursts into your observation and measure the search's recall",
        description="For each FILE: add simulated bursts to its real data (scaled by each "
        "channel's measured noise; written as a new file, the original untouched), search "
        "it with the given options and write DIR/<stem>/completeness.{md,json,png}: recall "
        "against S/N, DM and width, and each missed burst with the reason.",
    )
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="observations")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    p.add_argument("--n-bursts", type=int, default=40, help="bursts per file (default 40)")
    p.add_argument("--snr", type=float, nargs=2, default=(5.0, 20.0), metavar=("LO", "HI"),
                   help="injected S/N range (default 5 20)")  # fmt: skip
    p.add_argument("--dm", type=float, nargs=2, default=(50.0, 1000.0), metavar=("LO", "HI"),
                   help="injected DM range, pc cm^-3 (default 50 1000)")  # fmt: skip
    p.add_argument("--width", type=float, nargs=2, default=(0.5e-3, 8e-3), metavar=("LO", "HI"),
                   help="injected FWHM range, s (default 0.5e-3 8e-3)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="random seed of the bursts")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a search option (a SearchConfig field, e.g. dm_max=1500 or "
                   "snr_threshold=7); repeatable")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    p.set_defaults(func=run)


def search_config(pairs: list[str]):
    """A :class:`~drafts_ops.search.SearchConfig` from ``KEY=VALUE`` strings (JSON values)."""
    # lazy: keeps drafts --help fast
    from drafts_ops.cli.common import parse_params
    from drafts_ops.search import SearchConfig

    return SearchConfig.from_dict(parse_params(pairs))


def run(args: argparse.Namespace) -> int:
    # lazy: keeps drafts --help fast
    from drafts_ops.evaluation.injection import InjectionPlan, completeness, write_report

    plan = InjectionPlan(n_bursts=args.n_bursts, snr=tuple(args.snr), dm=tuple(args.dm),
                         width_s=tuple(args.width), seed=args.seed)  # fmt: skip
    config = search_config(args.option)
    reports = {}
    for path in args.files:
        out = args.out / path.stem if len(args.files) > 1 else args.out
        report = completeness(path, out, plan, config)
        paths = write_report(report, out)
        reports[str(path)] = {"recall": report.recall, **{k: str(v) for k, v in paths.items()}}
        if not args.json:
            missed = len(report.missed())
            print(f"{path}: recall {report.recall:.2f} ({len(report.bursts) - missed} of "
                  f"{len(report.bursts)} injected bursts found); {paths['md']}")  # fmt: skip
    if args.json:
        print(json.dumps(reports, indent=2))
    return 0
