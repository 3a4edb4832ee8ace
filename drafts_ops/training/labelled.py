"""People's labels (``drafts review``'s ``labels.csv``) as classifier examples: each
labelled candidate's cutouts in the classifier's input form, burst (1) or not (0; RFI and
noise), ``unsure`` left out; split into a training part and a held-out part that measures
a model before and after it learns from them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from drafts_ops.core.errors import ParameterError
from drafts_ops.ml import inputs as pp
from drafts_ops.review.catalogue import load_catalogue
from drafts_ops.review.images import stored_cutouts
from drafts_ops.review.labels import LabelStore

#: Labels that make an example, and its class.
CLASSES = {"burst": 1.0, "rfi": 0.0, "noise": 0.0}
#: Share of the labelled candidates held out to measure the models (at least one per class).
HELD_OUT_SHARE = 0.25


@dataclass(frozen=True)
class LabelledSet:
    """Labelled candidates in the classifier's input form ``[n, 64, 64]``, their classes
    and ids."""

    freq_time: np.ndarray
    dm_time: np.ndarray
    labels: np.ndarray
    ids: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.ids)

    def subset(self, index: np.ndarray) -> LabelledSet:
        return LabelledSet(self.freq_time[index], self.dm_time[index], self.labels[index],
                           tuple(self.ids[i] for i in index))  # fmt: skip

    def split(self, seed: int) -> tuple[LabelledSet, LabelledSet]:
        """``(training, held out)``: :data:`HELD_OUT_SHARE` of each class held out."""
        rng = np.random.default_rng([seed, 7])
        held = []
        for value in (0.0, 1.0):
            members = rng.permutation(np.flatnonzero(self.labels == value))
            if members.size >= 2:
                held.extend(members[: max(1, round(HELD_OUT_SHARE * members.size))])
        held_mask = np.zeros(len(self), bool)
        held_mask[np.asarray(held, int)] = True
        return self.subset(np.flatnonzero(~held_mask)), self.subset(np.flatnonzero(held_mask))


def labelled_set(directories: list[str | Path]) -> LabelledSet:
    """Every candidate labelled burst, RFI or noise under ``directories`` (the latest
    label of each), with its stored (or remade) cutouts."""
    catalogue = load_catalogue(directories)
    ft, dt, labels, ids = [], [], [], []
    for root in catalogue.roots:
        for item_id, row in sorted(LabelStore(root).latest().items()):
            if row["label"] not in CLASSES or item_id not in catalogue.items:
                continue
            freq_time, dm_time, _ = stored_cutouts(catalogue.items[item_id])
            ft.append(pp.prepare_freq_time(freq_time))
            dt.append(pp.prepare_dm_time_cutout(dm_time))
            labels.append(CLASSES[row["label"]])
            ids.append(item_id)
    if not ids:
        where = ", ".join(map(str, directories))
        raise ParameterError(f"no candidate labelled burst, rfi or noise in {where} (label "
                             "them with drafts review)")  # fmt: skip
    return LabelledSet(np.stack(ft).astype(np.float32), np.stack(dt).astype(np.float32),
                       np.asarray(labels, np.float32), tuple(ids))  # fmt: skip


def scores(probabilities: np.ndarray, labels: np.ndarray, threshold: float = 0.5) -> dict:
    """Recall of bursts, false-positive fraction of the others, accuracy, and mean log loss
    of ``probabilities`` against ``labels``."""
    p = np.clip(np.asarray(probabilities, np.float64), 1e-6, 1 - 1e-6)
    y = np.asarray(labels) > 0.5
    called = p >= threshold
    loss = -np.mean(np.where(y, np.log(p), np.log(1 - p)))
    return {"n": int(y.size), "bursts": int(y.sum()),
            "recall": float(called[y].mean()) if y.any() else None,
            "false_positive_fraction": float(called[~y].mean()) if (~y).any() else None,
            "accuracy": float((called == y).mean()), "log_loss": float(loss)}  # fmt: skip


def with_labelled(
    freq_time: np.ndarray, dm_time: np.ndarray, labels: np.ndarray, labelled: LabelledSet,
    share: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """A training pool with ``labelled`` added, repeated so that it makes about ``share``
    of the pool (a few hundred labels beside thousands of simulated examples)."""
    if not len(labelled) or share <= 0:
        return freq_time, dm_time, labels
    repeats = max(1, round(share * len(labels) / ((1.0 - share) * len(labelled))))
    return (np.concatenate([freq_time, np.tile(labelled.freq_time, (repeats, 1, 1))]),
            np.concatenate([dm_time, np.tile(labelled.dm_time, (repeats, 1, 1))]),
            np.concatenate([labels, np.tile(labelled.labels, repeats)]))  # fmt: skip
