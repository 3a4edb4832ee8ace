"""``drafts info FILE...``: print observation headers."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from drafts_ops.core.errors import DraftsError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="print the header of observation files")
    p.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="SIGPROC .fil, PSRFITS or HDF5 file"
    )
    p.add_argument("--json", action="store_true", help="one JSON object per file, keyed by path")
    p.set_defaults(func=run)


def _format_value(value: object) -> str:
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


def header_table(path: Path, summary: dict[str, object]) -> str:
    """A two-column text table of a header summary."""
    # lazy: keeps drafts --help fast
    from drafts_ops.io.header import KEYWORDS_BY_NAME

    width = max(len(k) for k in summary)
    lines = [f"== {path} ({summary.get('format', '?')}) =="]
    for key, value in summary.items():
        if key == "format":
            continue
        unit = KEYWORDS_BY_NAME[key].unit if key in KEYWORDS_BY_NAME else ""
        lines.append(f"  {key:<{width}}  {_format_value(value)} {unit}".rstrip())
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    # lazy: keeps drafts --help fast
    from drafts_ops.io import open_observation

    results: dict[str, object] = {}
    failures = 0
    for path in args.files:
        try:
            with open_observation(path) as reader:
                summary = reader.header.summary()
                summary["format"] = type(reader).__name__.removesuffix("Reader").lower()
        except DraftsError as err:
            failures += 1
            if args.json:
                results[str(path)] = {"error": str(err)}
            else:
                print(f"drafts info: error: {err}", file=sys.stderr)
            continue
        if args.json:
            results[str(path)] = summary
        else:
            print(header_table(path, summary))
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    return 2 if failures else 0
