"""``drafts review DIR...``: review the candidates of finished searches and surveys in the
browser, and label them (``labels.csv`` in each DIR)."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

#: Where the review page is served unless --host says otherwise (this machine only).
LOCAL_HOST = "127.0.0.1"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "review",
        help="review and label candidates in the browser (local web page)",
        description="Serve a page over the candidates of the finished searches under each "
        "DIR (a search's --out, or a survey's): a list across files and beams, sortable and "
        "filterable, each candidate in detail (waterfall, DM-time image, profile, with "
        "adjustable averaging; its provenance), and labels at the keyboard (b burst, r RFI, "
        "n noise, u unsure) saved to DIR/labels.csv. `drafts train classifier --labels DIR` "
        "learns from them.",
    )
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="output directories")
    p.add_argument("--host", default=LOCAL_HOST, help="address to listen on (default "
                   f"{LOCAL_HOST}: this machine only)")  # fmt: skip
    p.add_argument("--port", type=int, default=8765, help="port (0: any free one)")
    p.add_argument("--who", default=None, help="reviewer's name in labels.csv (default: user)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # lazy: keeps drafts --help fast
    from drafts_ops.review.catalogue import load_catalogue
    from drafts_ops.review.server import ReviewServer

    catalogue = load_catalogue(args.dirs)
    if args.host != LOCAL_HOST:
        print(f"drafts review: warning: serving on {args.host}: anyone who can reach this "
              "machine can read these outputs and write labels", file=sys.stderr)  # fmt: skip
    server = ReviewServer(catalogue, (args.host, args.port), who=args.who or _user())
    print(f"reviewing {len(catalogue.items)} candidates at {server.url} (Ctrl-C stops)",
          flush=True)  # fmt: skip
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return ""
