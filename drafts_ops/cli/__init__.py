"""The ``drafts`` command line.

Each sub-command lives in its own module under :mod:`drafts_ops.cli` with a function
``add_parser(subparsers)`` that registers it and sets ``func``; modules keep heavy imports
inside their handlers so that ``drafts --help`` stays fast. Commands that run Prefect flows
(search, survey, validate, deploy, trigger) are contributed by the ``flows`` package through
the ``drafts_ops.commands`` entry point, so this package never imports Prefect.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from drafts_ops import __version__
from drafts_ops.core import interrupts
from drafts_ops.core.errors import DraftsError, OptionError

#: Science sub-commands, in the order ``drafts --help`` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "info", "plan", "simulate", "dedisperse", "bench", "train", "evaluate", "inject", "review",
)  # fmt: skip


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


def storage_problem(err: OSError) -> str | None:
    """One line for an OSError a user can mend (space, permissions, a missing path)."""
    # lazy: keeps drafts --help fast
    import errno

    user = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT,
            errno.ENOTDIR, errno.EISDIR}  # fmt: skip
    if err.errno not in user:
        return None
    where = f"{err.filename}: " if err.filename else ""
    return f"{where}{err.strerror or os.strerror(err.errno)}"


def option_problem(err: Exception) -> str | None:
    """One line for bad options (``--block-size: must be greater than 0 (got 0)``): an
    :class:`~drafts_ops.core.errors.OptionError`, or a pydantic validation error of an
    options model (a flow run's parameters); ``None`` for any other exception."""
    if isinstance(err, OptionError):
        problems = err.problems
    elif type(err).__name__ == "ValidationError" and callable(getattr(err, "errors", None)):
        # lazy: keeps drafts --help fast
        from drafts_ops.core.options import problems_of

        problems = problems_of(err)
    else:
        return None
    return "; ".join(f"--{name.replace('_', '-')}: {message} (got {value!r})" if name else message
                     for name, message, value in problems)  # fmt: skip


def is_user_error(err: BaseException | None) -> bool:
    """Errors a user causes and can mend: bad files or options, full or forbidden disks."""
    if err is None:
        return False
    if isinstance(err, DraftsError) or type(err).__name__ == "ValidationError":
        return True
    return isinstance(err, OSError) and storage_problem(err) is not None


class UserErrorTracebacks(logging.Filter):
    """Keeps tracebacks of user errors off the console (orchestrators log them at ERROR
    with the whole stack); the error itself still prints as one line. ``--verbose`` shows
    them; the run's own log (e.g. Prefect's UI) keeps them."""

    def filter(self, record: logging.LogRecord) -> bool:
        err = record.exc_info[1] if record.exc_info else None
        if is_user_error(err):
            record.exc_info, record.exc_text = None, None
        message = record.getMessage()
        if "\nTraceback (most recent call last)" in message:
            record.msg, record.args = message.split("\nTraceback", 1)[0], None
        return True


#: :func:`gc.set_threshold` of the ``drafts`` process: collections of the youngest
#: generation after 10,000 net allocations (Python's default: 700), older ones as usual.
GC_THRESHOLDS = (10_000, 10, 10)


def console() -> None:
    """The ``drafts`` console script: :func:`main` with Ctrl-C and SIGTERM handled
    (:mod:`~drafts_ops.core.interrupts`: one line, children stopped, exit 130 or 143).

    The garbage collector is tuned for a process that imports Prefect, pydantic, numba
    and matplotlib (~10^6 long-lived objects) once: with Python's default thresholds it
    walked them all five times while they were imported (0.6 s of a GBT-like search's
    start on 2 cores); :data:`GC_THRESHOLDS` lets it run after every 10,000 net
    allocations rather than 700. Before leaving, the heap is frozen (:func:`gc.freeze`):
    the interpreter's last collections would otherwise walk every object again, about
    1 s after every command, to free memory the operating system reclaims anyway
    (outputs are written and closed, and Prefect's log and event queues drained, before
    it: those run on exit and are not garbage)."""
    gc.set_threshold(*GC_THRESHOLDS)
    status = main(handle_signals=True)
    gc.freeze()
    sys.exit(status)


def main(argv: Sequence[str] | None = None, *, handle_signals: bool = False) -> int:
    """Run ``drafts`` with ``argv``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if handle_signals:
        interrupts.install(args.command)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        for handler in logging.getLogger().handlers:
            handler.addFilter(UserErrorTracebacks())
    try:
        status = args.func(args)
    except DraftsError as err:
        print(f"drafts {args.command}: error: {option_problem(err) or err}", file=sys.stderr)
        return 2
    except OSError as err:  # a full, read-only or forbidden disk: one line, no traceback
        problem = storage_problem(err)
        if problem is None:
            raise
        print(f"drafts {args.command}: error: {problem}", file=sys.stderr)
        return 2
    except Exception as err:
        line = option_problem(err)
        if line is None:
            raise
        print(f"drafts {args.command}: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if interrupts.received():  # a signal: its line is printed; leave without waiting
            interrupts.finish()
        print(f"drafts {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into a reader that stopped early (head, less)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    if interrupts.received():  # interrupted, but a library swallowed it: still not a success
        interrupts.finish()
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
