"""``drafts evaluate search|classifier|beams``: end-to-end recall and false positives of the
search; the classifier on held-out candidates the search found; multi-beam coincidence on a
simulated 19-beam pointing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Literal, get_args

from drafts_ops.simulate.bands import SURVEY_BANDS

Target = Literal["search", "classifier", "beams"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate",
        help="measure the search end to end on held-out simulated observations",
        description="Simulate held-out observations in survey bands (bursts over S/N 6-30, "
        "DM to 2900, spaced down to 0.2 s, together with every RFI kind in the same files), "
        "search them as `drafts search` does (classical, sub-band classical, detector, both "
        "detectors, and both with the detector on four sub-bands, with the classifier) and "
        "tabulate recall by injected S/N, DM, width, "
        "bandwidth and band, and false positives per minute on the same files. Writes "
        "DIR/search_evaluation.json and .md. `classifier`: harvest held-out candidates "
        "from searches of such files and report the classifier's recall by S/N, its "
        "false-positive fraction per negative cause and its reliability curve "
        "(DIR/classifier_evaluation.md). `beams`: a simulated FAST 19-beam pointing with "
        "bursts at, between two and between three beams and the same RFI in every beam, "
        "searched and matched across beams: false positives per beam-minute and bursts "
        "found before and after coincidence (DIR/beams_evaluation.json).",
    )
    p.add_argument("target", choices=get_args(Target), help="what to evaluate")
    p.add_argument(
        "--per-bin", type=int, default=10, help="bursts per S/N bin per band (default 10)"
    )
    p.add_argument(
        "--bands",
        nargs="+",
        default=["fast", "gbt", "fast-raw"],
        choices=list(SURVEY_BANDS),
        help="survey bands to simulate (default: fast gbt fast-raw)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed (default: the held-out seed)")
    p.add_argument("--duration", type=float, default=60.0,
                   help="beams: seconds of data per beam (default 60)")  # fmt: skip
    p.add_argument(
        "--band-limited-fraction",
        type=float,
        default=None,
        help="search: fraction of bursts confined to part of the band (default 0.3; 1: a "
        "band-limited set, e.g. with --band-fraction-range 0.1 0.3)",
    )
    p.add_argument(
        "--band-fraction-range",
        type=float,
        nargs=2,
        metavar=("LO", "HI"),
        default=None,
        help="search: emitting band of the band-limited bursts, as fractions of the band "
        "(default 0.1 0.6)",
    )
    p.add_argument(
        "--examples",
        type=int,
        default=1000,
        help="classifier: held-out candidates to harvest (default 1000)",
    )
    p.add_argument(
        "--model", type=Path, default=None, help="classifier: ONNX file (default: shipped)"
    )
    p.add_argument("--out", type=Path, default=Path("search-eval"), help="output folder")
    p.add_argument(
        "--card",
        type=Path,
        default=None,
        help="also write the tables into this model card (e.g. models/MODEL_CARD.md)",
    )
    p.add_argument(
        "--keep-data", action="store_true", help="keep the simulated files under DIR/work"
    )
    p.add_argument(
        "--pool-cache",
        type=Path,
        default=None,
        help="classifier: folder that keeps the harvested candidates for the next run "
        "(the harvest takes ~25 min on 2 cores; comparing models then takes seconds)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.target == "classifier":
        return run_classifier(args)
    if args.target == "beams":
        return run_beams(args)
    # lazy: keeps drafts --help fast
    from drafts_ops.evaluation.search import evaluate_search
    from drafts_ops.evaluation.tables import results_markdown, update_model_card, write_results

    setup = evaluation_setup(args)
    work = args.out / "work" if args.keep_data else None

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    ev = evaluate_search(setup, work_dir=work, progress=progress)
    print(results_markdown(ev))
    paths = write_results(ev, args.out)
    if args.card is not None:
        paths["card"] = update_model_card(ev, args.card)
    print("\nwrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def evaluation_setup(args: argparse.Namespace):
    """The :class:`~drafts_ops.evaluation.setup.EvaluationSetup` the options ask for (defaults
    where an option is not given)."""
    # lazy: keeps drafts --help fast
    from drafts_ops.evaluation.setup import EvaluationSetup

    kwargs = {"per_bin": args.per_bin, "bands": tuple(args.bands)}
    if args.seed is not None:
        kwargs["seed"] = args.seed
    if args.band_limited_fraction is not None:
        kwargs["band_limited_fraction"] = args.band_limited_fraction
    if args.band_fraction_range is not None:
        kwargs["band_fraction_range"] = tuple(args.band_fraction_range)
    return EvaluationSetup(**kwargs)


def run_classifier(args: argparse.Namespace) -> int:
    """``drafts evaluate classifier``: the classifier on held-out harvested candidates."""
    # lazy: keeps drafts --help fast
    from drafts_ops.core.atomic import write_text_atomic
    from drafts_ops.core.errors import ParameterError
    from drafts_ops.ml.inference import load_classifier
    from drafts_ops.training import classifier_validation as validation
    from drafts_ops.training import harvest

    if args.examples < 1:
        raise ParameterError(f"--examples {args.examples} must be >= 1")
    seed = validation.CLASSIFIER_VALIDATION_SEED if args.seed is None else args.seed
    classifier = load_classifier(args.model)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    pool = harvest.harvest(seed, args.examples, cache=args.pool_cache, log=progress)
    probs = validation.classifier_probabilities(pool, classifier)
    text = validation.validate_classifier(pool, probs, seed=seed).markdown()
    print(text)
    page = f"# Classifier on search candidates\n\n{text}"
    paths = [write_text_atomic(args.out / "classifier_evaluation.md", page)]
    if args.card is not None:
        from drafts_ops.ml.card import write_generated

        paths.append(write_generated(args.card, {"classifier-candidates": text}))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def run_beams(args: argparse.Namespace) -> int:
    """``drafts evaluate beams``: coincidence across the beams of a simulated pointing."""
    # lazy: keeps drafts --help fast
    import json

    from drafts_ops.core.atomic import write_json_atomic
    from drafts_ops.evaluation.beams import BEAMS_SEED, evaluate_beams

    seed = BEAMS_SEED if args.seed is None else args.seed
    figures = evaluate_beams(args.out / "work", seed, args.duration)
    print(json.dumps(figures, indent=1))
    print(f"wrote {write_json_atomic(args.out / 'beams_evaluation.json', figures)}")
    return 0
