"""Command-line options shared by several sub-commands (one definition each).

Used by :mod:`drafts_ops.cli.dedisperse` and the ``drafts validate`` command of
:mod:`flows.commands`. Kept free of heavy imports so that ``drafts --help`` stays fast.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any

from drafts_ops.core.errors import ParameterError
from drafts_ops.dedisp.modes import BACKENDS
from drafts_ops.dedisp.plan import DMPlan

#: DM tolerance of the trial spacing rule: DMPlan's default.
DEFAULT_DM_TOL: float = inspect.signature(DMPlan.from_header).parameters["dm_tol"].default
#: New samples per streamed block of the dedispersion commands.
DEFAULT_BLOCK_SIZE = 8192


def add_dm_range_arguments(
    parser: argparse.ArgumentParser, *, dm_max: float | None = None, dm_tol: bool = False
) -> None:
    """Add ``--dm-min``, ``--dm-max``, ``--dm-step`` (and ``--dm-tol``), in pc cm^-3.

    ``dm_max=None`` makes ``--dm-max`` required; otherwise it is its default.
    """
    parser.add_argument(
        "--dm-min", type=float, default=0.0, help="lowest DM trial, pc cm^-3 (default 0)"
    )
    if dm_max is None:
        parser.add_argument("--dm-max", type=float, required=True, help="highest DM, pc cm^-3")
    else:
        parser.add_argument(
            "--dm-max",
            type=float,
            default=dm_max,
            help=f"highest DM, pc cm^-3 (default {dm_max:g})",
        )
    parser.add_argument(
        "--dm-step",
        type=float,
        default=None,
        help="fixed DM step, pc cm^-3 (default: the tolerance rule)",
    )
    if dm_tol:
        parser.add_argument(
            "--dm-tol",
            type=float,
            default=DEFAULT_DM_TOL,
            help=f"DM tolerance of the trial spacing rule (default {DEFAULT_DM_TOL:g})",
        )


def add_stream_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--backend`` and ``--block-size`` (new samples per streamed block)."""
    parser.add_argument(
        "--backend", choices=BACKENDS, default="cpu", help="where kernels run (default cpu)"
    )
    parser.add_argument(
        "--block-size",
        type=int,
        default=DEFAULT_BLOCK_SIZE,
        help=f"new samples per block (default {DEFAULT_BLOCK_SIZE})",
    )


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """``["k=v", "options.dm_max=500"]`` to a (nested) parameter dict.

    Values are JSON when they parse as JSON (numbers, true/false, null, lists, objects),
    else strings; a dotted key sets a field of a model parameter (``options.dm_max``).
    """
    # lazy: keeps drafts --help fast
    import json

    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ParameterError(f"{pair!r}: expected KEY=VALUE")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        *parents, leaf = key.split(".")
        target = params
        for part in parents:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise ParameterError(f"{pair!r}: {part} is already a value")
        target[leaf] = value
    return params
