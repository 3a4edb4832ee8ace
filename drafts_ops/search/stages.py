"""The stages after the streaming pass: merge the giants into candidates, make their
cutouts once, classify them and write the candidate files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from drafts_ops.core.atomic import atomic_path
from drafts_ops.detect.candidates import Candidate, candidates_from_clusters, reported_at_peaks
from drafts_ops.detect.cluster import labelled_clusters
from drafts_ops.detect.hidden_bursts import release_hidden_bursts
from drafts_ops.detect.plots import CandidatePlotter, wants_helper
from drafts_ops.detect.response import Response
from drafts_ops.detect.sidelobes import fold_clusters, fold_measured_sidelobes, sidelobe_owners
from drafts_ops.detect.single_pulse import Giants
from drafts_ops.detect.writers import fetch_name, write_cand, write_csv, write_fetch_h5
from drafts_ops.io import open_observation
from drafts_ops.ml.inference import load_classifier
from drafts_ops.search.config import PathLike, SearchConfig
from drafts_ops.search.plan import SearchPlan
from drafts_ops.search.samples import SearchedSamples
from drafts_ops.search.windows import CutoutMaker

# -- merge, cutouts, classify, write -----------------------------------------------------


def merge_block_results(
    paths: Sequence[PathLike], plan: SearchPlan, work_dir: PathLike | None = None
) -> list[Candidate]:
    """Cluster the giants of all blocks together and fold bow-tie sidelobes into their
    burst (those of band-limited and very wide bursts judged on the burst's measured
    pulse, read from the searched samples kept in ``work_dir`` or from the file): one
    candidate per burst, reported at its peak (the centre of a flat one:
    :func:`~drafts_ops.detect.candidates.reported_at_peaks`), brightest first."""
    dms = np.asarray(plan.dms)
    bands = plan.subband_frequencies() if plan.config.dedispersed_subbands > 1 else ()
    response = Response(dms, plan.header.chan_freqs, plan.header.tsamp,
                        plan.config.max_width_samples, bands)  # fmt: skip
    giants = Giants.concatenate([Giants.load(p) for p in paths])
    clusters, giants, label = labelled_clusters(giants, plan.config.links, response)
    owners = sidelobe_owners(clusters, dms, plan.header.chan_freqs, plan.header.tsamp,
                             max_width=plan.config.max_width_samples, bands=bands)  # fmt: skip
    clusters, into = fold_clusters(clusters, owners)
    candidates = candidates_from_clusters(
        clusters,
        dms,
        plan.header.tsamp,
        file=plan.own_file,
        beam=plan.raw_header.ibeam,
        subbands=plan.config.dedispersed_subbands > 1,
    )
    if candidates:
        with open_observation(plan.source) as reader:
            maker = CutoutMaker(reader, plan, SearchedSamples.find(Path(work_dir), plan)
                                if work_dir is not None else None, origin=0)  # fmt: skip
            candidates, boxcar = release_hidden_bursts(
                candidates, giants, into[label], response, plan.config.links,
                pulse_shape=maker.pulse_shape, snr_outside=maker.snr_outside,
                snr_within=maker.snr_within, boxcar=clusters.boxcar,
            )  # fmt: skip
            candidates = fold_measured_sidelobes(
                candidates, maker.pulse_shape, plan.header.chan_freqs, plan.header.tsamp,
                max_width=plan.config.max_width_samples, boxcar=boxcar,
                snr_outside=maker.snr_outside,
            )  # fmt: skip
    candidates = reported_at_peaks(candidates, clusters, dms, plan.header.tsamp)
    return own_candidates(candidates, plan)


def own_candidates(candidates: Sequence[Candidate], plan: SearchPlan) -> list[Candidate]:
    """The candidates the plan's own file reports, relative to its start.

    Without files around it: all of them, unchanged. Otherwise those whose arrival lies
    in the file, or, with ``plan.lead_in``, in the previous file's last ``delay(d)``
    samples that its own search could not reach (negative times: seconds before this
    file's start); each boundary is so searched exactly once.
    """
    if plan.origin == 0 and not plan.lead_in:
        return list(candidates)
    origin = plan.origin
    reach = plan.dm_plan().delays.max(axis=1) if plan.lead_in else np.zeros(len(plan.dms), int)
    mine = [c for c in candidates if c.sample >= origin - int(reach[c.dm_index])]
    return [c.replace(sample=c.sample - origin, tcand_s=(c.sample - origin) * plan.header.tsamp,
                      first_sample=c.first_sample - origin, last_sample=c.last_sample - origin)
            for c in mine]  # fmt: skip


def cutout_count(candidates: Sequence[Candidate], config: SearchConfig) -> int:
    """How many candidates (brightest first) need cutouts: all when classifying, else the
    ones that get ``.h5`` files or PNGs."""
    wanted = config.max_outputs if (config.write_h5 or config.write_plots) else 0
    return len(candidates) if config.classify else min(wanted, len(candidates))


def make_cutouts(
    candidates: Sequence[Candidate], path: PathLike, plan: SearchPlan, work_dir: PathLike,
    *, on_candidate: Callable[[int, int], None] | None = None,
) -> Path | None:  # fmt: skip
    """Compute each needed candidate's FETCH cutouts once; save them for the classifier,
    the ``.h5`` writer and the PNG (``work_dir/cutouts.npz``, float16). ``None`` if none.
    ``on_candidate(done, count)`` is called after each candidate (progress: a FAST raw
    candidate at high DM reads seconds of 4096-channel samples)."""

    count = cutout_count(candidates, plan.config)
    if count == 0:
        return None
    pairs = []
    with open_observation(plan.source) as reader:
        maker = CutoutMaker(reader, plan, SearchedSamples.find(Path(work_dir), plan))
        for cand in candidates[:count]:
            pairs.append(maker.cutouts(cand))
            if on_candidate is not None:
                on_candidate(len(pairs), count)
    target = Path(work_dir) / "cutouts.npz"
    with atomic_path(target) as tmp, tmp.open("wb") as fh:
        np.savez(fh, freq_time=np.stack([p[0] for p in pairs]).astype(np.float16),
                 dm_time=np.stack([p[1] for p in pairs]).astype(np.float16))  # fmt: skip
    return target


def load_cutouts(path: PathLike | None) -> tuple[np.ndarray, np.ndarray]:
    """``(freq_time [n, 256, 256], dm_time [n, 256, 256])`` float32 from :func:`make_cutouts`."""
    if path is None:
        empty = np.empty((0, 0, 0), np.float32)
        return empty, empty
    with np.load(path) as npz:
        return npz["freq_time"].astype(np.float32), npz["dm_time"].astype(np.float32)


def classify_candidates(
    candidates: Sequence[Candidate], plan: SearchPlan, cutouts: PathLike | None,
    *, classifier: Any = None,
) -> list[Candidate]:  # fmt: skip
    """Attach the classifier's burst probability to each candidate (any detector).

    With ``config.classify`` off the candidates are returned unchanged. ``classifier`` is
    any object with ``predict(freq_time, dm_time) -> float`` (default: the shipped model).
    """
    if not plan.config.classify or not candidates:
        return list(candidates)
    if classifier is None:
        classifier = load_classifier(plan.config.classifier)
    ft, dt = load_cutouts(cutouts)
    threshold = plan.config.classifier_threshold
    probs = [float(classifier.predict(ft[i], dt[i])) for i in range(len(candidates))]
    return [cand.replace(classifier_prob=p, is_burst=p >= threshold)
            for cand, p in zip(candidates, probs, strict=True)]  # fmt: skip


def write_outputs(
    candidates: Sequence[Candidate], path: PathLike, plan: SearchPlan, out_dir: PathLike,
    cutouts: PathLike | None = None,
) -> dict[str, Path]:  # fmt: skip
    """Write ``candidates.csv``, ``<stem>.cand`` and, for the first ``max_outputs``
    candidates (brightest first) that count as bursts (:func:`is_burst`), FETCH
    ``h5/<id>.h5`` and ``plots/<id>.png``, from the saved cutouts (``.h5`` files for every
    one of the first ``max_outputs`` with ``h5_for="all"``).

    Returns the paths: keys ``csv``, ``cand``, and ``h5:<i>`` / ``png:<i>`` for candidate i.
    """

    cfg = plan.config
    out_dir = Path(out_dir)
    outputs = {
        "csv": write_csv(candidates, out_dir / "candidates.csv"),
        "cand": write_cand(candidates, out_dir / f"{Path(path).stem}.cand"),
    }
    chosen = list(candidates)[: cfg.max_outputs] if (cfg.write_h5 or cfg.write_plots) else []
    if not chosen:
        return outputs

    ft_all, dt_all = load_cutouts(cutouts)
    header = plan.own_header  # the searched resolution: candidates and cutouts are in it
    plotter = None  # made at the first PNG (matplotlib's import takes ~0.5 s)
    plotted = [cfg.write_plots and is_burst(cand, cfg) for cand in chosen]
    helper = wants_helper(sum(plotted))  # a second process draws some of many PNGs
    try:
        for i, cand in enumerate(chosen):
            ft, dt = ft_all[i], dt_all[i]
            name = fetch_name(cand, header)
            if cfg.write_h5 and (cfg.h5_for == "all" or is_burst(cand, cfg)):
                h5_path = out_dir / "h5" / f"{name}.h5"
                outputs[f"h5:{i}"] = write_fetch_h5(cand, header, ft, dt, h5_path)
            if plotted[i]:
                plotter = plotter or CandidatePlotter(tsamp=header.tsamp, fmax_mhz=header.fmax,
                                                      fmin_mhz=header.fmin,
                                                      helper=helper)  # fmt: skip
                png_path = out_dir / "plots" / f"{name}.png"
                outputs[f"png:{i}"] = plotter.plot(cand, ft, dt, png_path)
    finally:
        if plotter is not None:  # PNGs are written while the next candidate is drawn
            plotter.finish()
    return outputs


def is_burst(cand: Candidate, config: SearchConfig) -> bool:
    """Whether a candidate counts as a burst: classifier probability at least
    ``classifier_threshold`` (every candidate when it was not classified)."""
    prob = cand.classifier_prob
    return prob is None or prob >= config.classifier_threshold
