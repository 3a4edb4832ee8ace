"""The validation of files without Prefect: every stage of each file in sequence, then the
report (``drafts validate`` runs the same stages as Prefect tasks, ``flows/validate.py``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from drafts_ops.core.errors import ParameterError
from drafts_ops.validation.config import ValidationConfig
from drafts_ops.validation.report import write_report
from drafts_ops.validation.stages import ValidationReport, build_report, validate_file


def validate_files(
    files: list[str | Path],
    out_dir: str | Path,
    config: ValidationConfig | None = None,
    *,
    plots: bool = True,
) -> tuple[ValidationReport, dict[str, Path]]:
    """Validate ``files`` and write ``validation.{html,md,json}`` to ``out_dir`` (no Prefect).

    Returns the report and the written paths by kind (``html``, ``md``, ``json``).
    """
    config = config or ValidationConfig()
    if not files:
        raise ParameterError("no observation file to validate")
    work = Path(out_dir) / "work"
    results = [r for f in files for r in validate_file(f, config, work, plots=plots)]
    report = build_report(results, config)
    paths = write_report(report, out_dir)
    shutil.rmtree(work, ignore_errors=True)  # the paths' DM-time arrays: the report has them
    return report, paths
