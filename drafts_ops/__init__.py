"""drafts-ops: a fast-radio-burst search pipeline.

Science code only: readers (:mod:`drafts_ops.io`), simulation, dedispersion
(:mod:`drafts_ops.dedisp`), detection and models. Orchestration lives in ``flows``.
"""

from drafts_ops.core.errors import DraftsError, ObservationError

__version__ = "0.1.0"

__all__ = ["DraftsError", "ObservationError", "__version__"]
