"""Validation of the production dedispersion operator against the prototype kernel.

Both paths dedisperse the same observation, streamed in blocks with the plan's overlap;
the report (``validation.html`` / ``.md`` / ``.json``) gives, per production algorithm:

* numerical parity with the prototype (:mod:`~drafts_ops.validation.parity`), and where a
  difference lives (DM trials and channels, by channel bisection on a random-data probe);
* S/N at injected or detected bursts and candidate agreement
  (:mod:`~drafts_ops.validation.agreement`);
* performance per stage (:mod:`~drafts_ops.validation.runner`,
  :func:`~drafts_ops.validation.stages.performance_rows`);
* figures (:mod:`~drafts_ops.validation.plots`) and a verdict with its thresholds
  (:mod:`~drafts_ops.validation.verdict`, :class:`~drafts_ops.validation.config.Thresholds`).

Entry point without Prefect: :func:`~drafts_ops.validation.run.validate_files`; the
Prefect flow is ``flows.validate.validate_flow``.
"""

from drafts_ops.validation.config import DelayFault, Thresholds, ValidationConfig
from drafts_ops.validation.run import validate_files
from drafts_ops.validation.stages import ValidationReport, validate_file

__all__ = [
    "DelayFault",
    "Thresholds",
    "ValidationConfig",
    "ValidationReport",
    "validate_file",
    "validate_files",
]
