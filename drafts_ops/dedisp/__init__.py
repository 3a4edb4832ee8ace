"""Dedispersion: the DM plan, the numpy reference, the prototype kernel and the production
operator (registry, tiling, workspace, batching, streaming; brute force, sub-band, CUDA).

Call dedispersion through :func:`dedisperse` (and :func:`dedisperse_batch`,
:func:`stream_dedisperse`); :func:`describe` lists the registered operators.
"""

from drafts_ops.dedisp.operator import (
    dedisperse,
    dedisperse_batch,
    stream_dedisperse,
    tiling_for,
)
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.dedisp.registry import describe, get_operator, operators

__all__ = [
    "DMPlan",
    "dedisperse",
    "dedisperse_batch",
    "describe",
    "get_operator",
    "operators",
    "stream_dedisperse",
    "tiling_for",
]
