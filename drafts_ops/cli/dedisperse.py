"""``drafts dedisperse FILE``: stream an observation into a DM–time array."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from drafts_ops.cli.common import add_dm_range_arguments, add_stream_arguments
from drafts_ops.dedisp.modes import ALGORITHMS, MODES


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dedisperse",
        help="dedisperse an observation into a DM-time array (.npy or .h5)",
        description="Stream FILE block by block (overlap = maximum dispersion delay) "
        "through the prototype kernel or the production operator.",
    )
    p.add_argument("file", type=Path, metavar="FILE", help="observation (.fil, PSRFITS, .h5)")
    add_dm_range_arguments(p, dm_tol=True)
    p.add_argument(
        "--mode",
        choices=MODES,
        default="production",
        help="packaged operator, as the search uses (default), or the direct-launched "
        "prototype kernel",
    )
    add_stream_arguments(p)
    p.add_argument(
        "--algorithm",
        choices=ALGORITHMS,
        default="brute",
        help="production mode: brute force (default: exact, the DM-time array to check "
        "against) or two-stage sub-band (the search's, faster, within its tolerance)",
    )
    p.add_argument(
        "--decimate",
        action="store_true",
        help="production mode: search high DMs at coarser time resolution (DDplan rule)",
    )
    p.add_argument("--out", type=Path, required=True, help="output file: .npy or .h5")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # lazy: keeps drafts --help fast
    from drafts_ops.dedisp.plan import DMPlan
    from drafts_ops.dedisp.stream import dedisperse_file
    from drafts_ops.io import open_observation

    with open_observation(args.file) as reader:
        plan = DMPlan.from_header(
            reader.header,
            args.dm_min,
            args.dm_max,
            args.dm_step,
            dm_tol=args.dm_tol,
            decimate=args.decimate,
        )
        path = dedisperse_file(
            reader,
            plan,
            args.out,
            block_size=args.block_size,
            mode=args.mode,
            backend=args.backend,
            algorithm=args.algorithm,
        )
    summary = {"out": str(path), "mode": args.mode, "algorithm": args.algorithm}
    print(json.dumps({**summary, **plan.summary()}))
    return 0
