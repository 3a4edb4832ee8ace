"""The survey's own options (what ``drafts survey`` takes beside a search's options)."""

from __future__ import annotations

from drafts_ops.core.options import Options, option


class SurveyOptions(Options):
    """How a survey goes over a directory of observations."""

    what = "survey"

    pattern: str = option("*.fil", "survey", "glob of observation files in the directory")
    max_files: int = option(2, "survey", "observations searched concurrently", ge=1, le=64)
    settle_s: float = option(60.0, "survey", "seconds a file must be unchanged before it is "
                             "searched", unit="s", ge=0)  # fmt: skip
    max_attempts: int = option(3, "survey", "searches of a failing file before it is left alone",
                               ge=1, le=100)  # fmt: skip
    wait: bool = option(False, "survey", "wait for another survey of --out to finish")
    beams: str | None = option(None, "survey", "beam layout (fast19, parkes13 or a YAML file): "
                               "coincidence across the beams of each pointing, RFI "
                               "flagged")  # fmt: skip
    beam_pattern: str = option(r"M(\d{2})", "survey", "regular expression of the beam number "
                               "in file names")  # fmt: skip
    join_files: bool = option(True, "survey", "search each file with the files of its beam just "
                              "before and after it, so that bursts sweeping across a boundary "
                              "are found once")  # fmt: skip
