"""The search of one observation: its options, its plan, the streaming pass, the stages
after it and the one sequence that runs them.

| module | what it holds |
|---|---|
| :mod:`~drafts_ops.search.config` | :class:`SearchConfig`, every option of a search |
| :mod:`~drafts_ops.search.plan` | :func:`plan_search`: searched header, DM trials, blocks |
| :mod:`~drafts_ops.search.samples` | reading searched samples; what a decimating pass keeps |
| :mod:`~drafts_ops.search.streaming` | the streaming pass: :func:`search_segment` |
| :mod:`~drafts_ops.search.dedispersion` | the pass's dedispersion and boxcar calls |
| :mod:`~drafts_ops.search.subbands` | sub-band searches and the detector's sub-band rows |
| :mod:`~drafts_ops.search.neural` | the neural detector's peaks in the pass |
| :mod:`~drafts_ops.search.windows` | a candidate's window: cutouts, pulse measurements |
| :mod:`~drafts_ops.search.stages` | merge, cutouts, classify, write |
| :mod:`~drafts_ops.search.report` | ``report.html`` |
| :mod:`~drafts_ops.search.outputs` | the output directory and its ``DONE.json`` |
| :mod:`~drafts_ops.search.run` | :func:`run_search`, the stage sequence, and its runners |
"""

from drafts_ops.search.config import Detector, SearchConfig
from drafts_ops.search.outputs import DONE_FILE, WORK_DIR, is_complete
from drafts_ops.search.plan import SearchPlan, plan_search
from drafts_ops.search.run import (
    KERNELS_COMPILING,
    STAGES,
    SearchResult,
    SerialRunner,
    StageRunner,
    run_search,
)
from drafts_ops.search.samples import read_searched
from drafts_ops.search.stages import (
    classify_candidates,
    load_cutouts,
    make_cutouts,
    merge_block_results,
    write_outputs,
)
from drafts_ops.search.streaming import search_segment

__all__ = [
    "DONE_FILE",
    "KERNELS_COMPILING",
    "STAGES",
    "WORK_DIR",
    "Detector",
    "SearchConfig",
    "SearchPlan",
    "SearchResult",
    "SerialRunner",
    "StageRunner",
    "classify_candidates",
    "is_complete",
    "load_cutouts",
    "make_cutouts",
    "merge_block_results",
    "plan_search",
    "read_searched",
    "run_search",
    "search_segment",
    "write_outputs",
]
