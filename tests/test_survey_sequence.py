"""The survey's sequence runs without Prefect (drafts_ops.survey.sequence.run_survey): the
same ledger, states, merged candidates and page as the flow, and a rerun searches nothing."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from flowdata import SEARCH, write_observation

from drafts_ops.search.config import SearchOptions
from drafts_ops.survey.files import SURVEY_CANDIDATES
from drafts_ops.survey.ledger import Ledger
from drafts_ops.survey.options import SurveyOptions
from drafts_ops.survey.sequence import SerialSurveyRunner, run_survey, summary_markdown


def test_a_survey_runs_without_prefect(tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    rng = np.random.default_rng(3)
    for name, dm, t_s in (("a.fil", 90.0, 2.0), ("b.fil", 180.0, 3.0)):
        write_observation(incoming / name, rng, dm=dm, t_s=t_s)
    (incoming / "broken.fil").write_bytes((incoming / "a.fil").read_bytes()[:300])
    out = tmp_path / "out"
    seen = []
    options = SurveyOptions(settle_s=0)
    summary = run_survey(incoming, out, options, SearchOptions(**SEARCH),
                         runner=SerialSurveyRunner(), progress=seen.append)  # fmt: skip
    assert (summary["attempted"], summary["searched"], summary["done"]) == (3, 2, 2)
    assert [q["file"] for q in summary["quarantined"]] == ["broken.fil"]
    assert sorted(seen) == ["a.fil", "b.fil", "broken.fil"]
    with (out / SURVEY_CANDIDATES).open(newline="") as fh:
        keys = {row["key"] for row in csv.DictReader(fh)}
    assert keys == {"a.fil", "b.fil"}
    assert Ledger.load(out).counts() == {"done": 2, "quarantined": 1}
    assert (out / "index.html").exists() and "| 3 | 3 | 2 | 0 |" in summary_markdown(summary)
    again = run_survey(incoming, out, options, SearchOptions(**SEARCH))
    # the quarantined file was moved aside: the rerun sees the two searched ones, done
    assert (again["scanned"], again["searched"], again["skipped"]) == (2, 0, 2)
    assert again["candidates_total"] == summary["candidates_total"]
