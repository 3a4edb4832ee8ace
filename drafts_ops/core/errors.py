"""The one exception family of drafts-ops.

Every error a user can cause (bad files, impossible parameters, missing models) is a
:class:`DraftsError`. The command line prints its message on one line and exits non-zero;
the survey flow records it and carries on with the next file.
"""

from __future__ import annotations

from os import PathLike


class DraftsError(Exception):
    """Base class of every error drafts-ops raises on purpose."""


class ObservationError(DraftsError):
    """A file cannot be read as an observation (missing, truncated, corrupt, unsupported).

    Parameters
    ----------
    path
        The file concerned (``None`` when the problem is with in-memory data).
    problem
        What is wrong, in words a user can act on.
    """

    def __init__(self, path: str | PathLike[str] | None, problem: str) -> None:
        self.path = None if path is None else str(path)
        self.problem = problem
        where = f"{self.path}: " if self.path else ""
        super().__init__(f"{where}{problem}")

    def __reduce__(self):  # keep pickling (process pools, Prefect) working
        return (type(self), (self.path, self.problem))


class ParameterError(DraftsError, ValueError):
    """An impossible or inconsistent parameter (negative DM range, zero block size, ...)."""


class OperatorError(DraftsError):
    """A dedispersion operator was called with a wrong shape, dtype, backend or algorithm."""


class ModelError(DraftsError):
    """A neural model file is missing, corrupt, or does not match its recorded hash."""


class OptionError(ParameterError):
    """Options that fail their model's checks (:mod:`drafts_ops.core.options`).

    ``problems`` lists ``(option, message, value)``: the option's field name (``""`` for a
    problem of several options together), what is wrong, and the value given. The message
    names every problem on one line; the command line shows them as ``--flag: message``.
    """

    def __init__(self, what: str, problems: list[tuple[str, str, object]]) -> None:
        self.what = what
        self.problems = list(problems)
        text = "; ".join(f"{name} = {value!r}: {message}" if name else message
                         for name, message, value in self.problems)  # fmt: skip
        super().__init__(f"bad {what} options: {text}")

    def __reduce__(self):  # keep pickling (process pools, Prefect) working
        return (type(self), (self.what, self.problems))
