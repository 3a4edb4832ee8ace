"""The ``drafts`` command line.

Each sub-command lives in its own module under :mod:`drafts_ops.cli` with a function
``add_parser(subparsers)`` that registers it and sets ``func``; modules keep heavy imports
inside their handlers so that ``drafts --help`` stays fast. Commands that run Prefect flows
(search, survey, validate, deploy, trigger) are contributed by the ``flows`` package through
the ``drafts_ops.commands`` entry point, so this package never imports Prefect.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from drafts_ops import __version__
from drafts_ops.errors import DraftsError

#: Science sub-commands, in the order ``drafts --help`` lists them.
COMMAND_MODULES: tuple[str, ...] = ("info", "dedisperse", "bench")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="drafts",
        description="drafts-ops: fast-radio-burst search (readers, dedispersion, detection).",
    )
    parser.add_argument("--version", action="version", version=f"drafts-ops {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"drafts_ops.cli.{name}").add_parser(sub)
    for plugin in entry_points(group="drafts_ops.commands"):
        try:
            plugin.load()(sub)
        except ImportError as err:  # an optional extra is missing: the rest still works
            logging.getLogger(__name__).debug("commands %s unavailable: %s", plugin.name, err)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``drafts`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        status = args.func(args)
    except DraftsError as err:
        print(f"drafts {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"drafts {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
