"""``drafts dedisperse FILE``: stream an observation into a DM–time array."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from drafts_ops.dedisp.modes import BACKENDS, MODES


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dedisperse",
        help="dedisperse an observation into a DM-time array (.npy or .h5)",
        description="Stream FILE block by block (overlap = maximum dispersion delay) "
        "through the prototype kernel or the production operator.",
    )
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("--dm-min", type=float, default=0.0, help="lowest DM, pc cm^-3 (default 0)")
    p.add_argument("--dm-max", type=float, required=True, help="highest DM, pc cm^-3")
    p.add_argument(
        "--dm-step", type=float, default=None, help="fixed DM step (default: tolerance rule)"
    )
    p.add_argument("--dm-tol", type=float, default=1.25, help="DM tolerance (default 1.25)")
    p.add_argument("--mode", choices=MODES, default="prototype")
    p.add_argument("--backend", choices=BACKENDS, default="cpu")
    p.add_argument("--out", type=Path, required=True, help="output file: .npy or .h5")
    p.add_argument(
        "--block-size", type=int, default=8192, help="new samples per block (default 8192)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from drafts_ops.dedisp.plan import DMPlan
    from drafts_ops.dedisp.stream import dedisperse_file
    from drafts_ops.io import open_observation

    with open_observation(args.file) as reader:
        plan = DMPlan.from_header(
            reader.header, args.dm_min, args.dm_max, args.dm_step, dm_tol=args.dm_tol
        )
        path = dedisperse_file(
            reader,
            plan,
            args.out,
            block_size=args.block_size,
            mode=args.mode,
            backend=args.backend,
        )
    print(json.dumps({"out": str(path), "mode": args.mode, **plan.summary()}))
    return 0
