"""The bottom layer: what every other layer may use and which itself imports nothing of
drafts-ops. The one error family (:mod:`~drafts_ops.core.errors`), atomic writes
(:mod:`~drafts_ops.core.atomic`), shipped files (:mod:`~drafts_ops.core.resources`), the
performance log (:mod:`~drafts_ops.core.perf`) and the machine's facts
(:mod:`~drafts_ops.core.hardware`)."""
