"""``drafts plan FILE``: the DM plan a search of FILE would use, as PRESTO's DDplan prints
it (DM ranges, their steps, time averaging, trials, share of the work, modelled worst S/N
loss, block, overlap and memory), without searching."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="print the DM plan (ranges, time averaging, trials, S/N loss) of a search",
        description="Plan the search of FILE with the given options and print its DM ranges: "
        "each range's DM bounds and step, the samples it averages, its trials, its share of "
        "the dedispersion work, the modelled worst S/N loss of a burst from one sample wide "
        "against an undecimated search, and its block, overlap and input memory.",
    )
    p.add_argument("file", type=Path, metavar="FILE", help="observation")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    # lazy: keeps drafts --help fast
    from drafts_ops.cli.options import add_option_arguments
    from drafts_ops.search.config import SearchConfig

    add_option_arguments(p, SearchConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # lazy: keeps drafts --help fast
    from drafts_ops.cli.options import options_from_args
    from drafts_ops.search.config import SearchConfig
    from drafts_ops.search.plan import plan_search, plan_table

    config = options_from_args(SearchConfig, args)
    plan = plan_search(args.file, config)
    if args.json:
        print(json.dumps({"file": str(args.file), "tsamp_s": plan.header.tsamp,
                          "nchans": plan.header.nchans, "blocks": len(plan.blocks),
                          "ranges": plan.range_rows(), "notes": list(plan.notes)},
                         indent=1))  # fmt: skip
        return 0
    h = plan.header
    print(f"{args.file}: {h.nchans} channels, {h.fmin:.1f}-{h.fmax:.1f} MHz, "
          f"{h.tsamp * 1e6:.3f} us, {h.tobs:.2f} s; {len(plan.blocks)} blocks")  # fmt: skip
    print(plan_table(plan.range_rows(), h.tsamp))
    for note in plan.notes:
        print(f"note: {note}")
    return 0
