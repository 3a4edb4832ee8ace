"""The candidates a review shows: every finished search under the given output
directories (one search's directory, or a survey's with its ``files/*``), each candidate
with a stable id, its file, beam, products and the search's provenance."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drafts_ops.core.errors import ParameterError
from drafts_ops.core.perf import PERF_FILENAME
from drafts_ops.detect.candidates import Candidate
from drafts_ops.detect.writers import arrival_key, products_by_arrival, read_csv
from drafts_ops.search.outputs import DONE_FILE
from drafts_ops.search.report import REPORT_FILE
from drafts_ops.survey.beams import beam_of

#: How deep below a given directory searches are looked for (a survey: files/<name>/).
SEARCH_DEPTH = 3


@dataclass(frozen=True)
class ReviewItem:
    """One candidate under review. ``id`` is ``<root>:<search dir>:<row>``: the given
    directory's index, the search's directory relative to it, the candidates.csv row."""

    id: str
    root: int
    search_dir: Path
    row: int
    candidate: Candidate
    file: str
    beam: str
    h5: Path | None
    png: Path | None

    def summary(self) -> dict[str, Any]:
        """What the list shows (JSON-ready)."""
        c = self.candidate
        return {"id": self.id, "file": self.file, "beam": self.beam, "t": round(c.tcand_s, 6),
                "dm": round(c.dm, 3), "snr": round(c.snr, 2),
                "width_ms": round(c.width_s * 1e3, 3),
                "prob": None if c.classifier_prob is None else round(c.classifier_prob, 4),
                "burst": c.is_burst, "subband": c.subband,
                "has_h5": self.h5 is not None}  # fmt: skip


@dataclass(frozen=True)
class Catalogue:
    """The review's directories and their candidates by id."""

    roots: tuple[Path, ...]
    items: dict[str, ReviewItem]

    def get(self, item_id: str) -> ReviewItem:
        if item_id not in self.items:
            raise KeyError(item_id)
        return self.items[item_id]

    def provenance(self, item: ReviewItem) -> dict[str, Any]:
        """The search's record of a candidate: its file, header figures and options
        (``perf.json``), and links to its report and plot (relative to the server)."""
        perf = item.search_dir / PERF_FILENAME
        doc = json.loads(perf.read_text()) if perf.exists() else {}
        root = self.roots[item.root]
        links = {name: f"/files/{item.root}/{path.relative_to(root).as_posix()}"
                 for name, path in (("report", item.search_dir / REPORT_FILE),
                                    ("plot", item.png), ("h5", item.h5))
                 if path is not None and path.exists()}  # fmt: skip
        return {**item.summary(), "candidate": item.candidate.to_dict(),
                "observation": doc.get("observation", {}),
                "run": {k: doc.get("run", {}).get(k) for k in ("file", "dedisp_mode", "algorithm",
                                                               "detector", "notes", "options")},
                "links": links}  # fmt: skip


def finished_searches(root: Path) -> list[Path]:
    """Directories under ``root`` (itself included, :data:`SEARCH_DEPTH` deep) that hold a
    finished search (``candidates.csv`` and ``DONE.json``)."""
    found = []
    for depth in range(SEARCH_DEPTH + 1):
        for done in sorted(root.glob("/".join(["*"] * depth + [DONE_FILE]))):
            if (done.parent / "candidates.csv").exists():
                found.append(done.parent)
    return found


def load_catalogue(directories: list[str | Path]) -> Catalogue:
    """The candidates of every finished search under ``directories``."""
    roots = tuple(Path(d).resolve() for d in directories)
    items: dict[str, ReviewItem] = {}
    for index, root in enumerate(roots):
        if not root.is_dir():
            raise ParameterError(f"{root}: no such directory")
        searches = finished_searches(root)
        if not searches:
            raise ParameterError(f"{root}: no finished search in it (candidates.csv and "
                                 f"{DONE_FILE})")  # fmt: skip
        for folder in searches:
            for item in _items(index, root, folder):
                items[item.id] = item
    return Catalogue(roots, items)


def _items(index: int, root: Path, folder: Path) -> list[ReviewItem]:
    relative = folder.relative_to(root).as_posix()
    perf = folder / PERF_FILENAME
    searched = json.loads(perf.read_text()).get("run", {}).get("file", "") if perf.exists() else ""
    h5s = products_by_arrival(folder / "h5", ".h5")
    pngs = products_by_arrival(folder / "plots", ".png")
    out = []
    for row, cand in enumerate(read_csv(folder / "candidates.csv")):
        name = Path(cand.file or searched.split(" ")[0] or folder.name).name
        beam = beam_of(name)
        beam = cand.beam if beam is None and cand.beam else beam
        out.append(ReviewItem(f"{index}:{relative}:{row}", index, folder, row, cand, name,
                              "" if beam is None else str(beam), h5s.get(arrival_key(cand)),
                              pngs.get(arrival_key(cand))))  # fmt: skip
    return out
