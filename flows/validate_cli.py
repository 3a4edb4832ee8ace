"""``drafts validate FILE... --out DIR``: run the validation flow; exit code = verdict.

Exit status: 0 when every check passes, 1 when any fails, 2 on an error (bad file or
parameter; the ``drafts`` entry point turns a :class:`DraftsError` into 2).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="validate production dedispersion against the prototype (HTML/MD/JSON report)",
        description="Dedisperse each FILE with the prototype kernel and every production "
        "algorithm (streamed, same overlap), compare them (parity, S/N at bursts, "
        "candidates, performance) and write OUT/validation.html, .md and .json. "
        "Exit status 0: pass, 1: fail, 2: error.",
    )
    p.add_argument("files", type=Path, nargs="+", metavar="FILE")
    p.add_argument("--out", type=Path, required=True, help="report directory")
    p.add_argument("--dm-min", type=float, default=0.0, help="lowest DM, pc cm^-3 (default 0)")
    p.add_argument("--dm-max", type=float, default=1000.0, help="highest DM (default 1000)")
    p.add_argument(
        "--dm-step", type=float, default=None, help="fixed DM step (default: tolerance rule)"
    )
    p.add_argument("--algorithms", nargs="+", default=None, metavar="ALG",
                   help="production algorithms to check (default: all registered)")  # fmt: skip
    p.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--block-size", type=int, default=8192, help="new samples per block")
    p.add_argument(
        "--max-samples", type=int, default=None, help="validate only the first N samples"
    )
    p.add_argument("--repeats", type=int, default=1, help="timed passes per path (fastest kept)")
    p.add_argument("--inject-fault", default=None, metavar="DM_INDEX,CHANNEL[,SHIFT[,ALG]]",
                   help="self-test: break one production delay; the report must fail")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flows.validate import validate_flow

    summary = validate_flow(
        files=[str(f) for f in args.files],
        out_dir=str(args.out),
        dm_min=args.dm_min,
        dm_max=args.dm_max,
        dm_step=args.dm_step,
        algorithms=args.algorithms,
        backend=args.backend,
        block_size=args.block_size,
        max_samples=args.max_samples,
        repeats=args.repeats,
        delay_fault=args.inject_fault,
    )
    for line in summary["verdict"]:
        print(line)
    print(f"validation {'PASS' if summary['passed'] else 'FAIL'}: {summary['reports']['html']}")
    return 0 if summary["passed"] else 1
