"""Names of the dedispersion paths and backends: the one source of CLI and flow choices.

Kept free of heavy imports so that ``drafts --help`` stays fast.
"""

from __future__ import annotations

from typing import Literal, get_args

#: The two dedispersion paths (DESIGN.md, "The two development paths").
Mode = Literal["prototype", "production"]
MODES: tuple[str, ...] = get_args(Mode)

#: Where a kernel runs.
Backend = Literal["cpu", "cuda"]
BACKENDS: tuple[str, ...] = get_args(Backend)
