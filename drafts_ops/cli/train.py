"""``drafts train detector|classifier``: train a neural model on simulated data, export ONNX."""

from __future__ import annotations

import argparse
from pathlib import Path

from drafts_ops.core.errors import ParameterError
from drafts_ops.ml import MODEL_KINDS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train the DM-time detector or the burst classifier (needs the train extra)",
    )
    p.add_argument("model", choices=MODEL_KINDS, help="which network to train")
    p.add_argument("--steps", type=int, default=None, help="optimiser steps (default: full run)")
    p.add_argument("--seed", type=int, default=0, help="seed of data, weights and batches")
    p.add_argument("--out", type=Path, default=Path("models"), help="output folder (models/)")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    p.add_argument(
        "--pool", type=int, default=None, help="simulated examples to train on (default: full)"
    )
    p.add_argument(
        "--pool-cache",
        type=Path,
        default=None,
        help="folder that keeps the harvested examples for the next run (classifier: "
        "candidates; detector: survey-band DM-time images)",
    )
    p.add_argument("--labels", nargs="+", type=Path, default=None, metavar="DIR",
                   help="classifier: also learn from the candidates labelled with drafts "
                   "review in these output directories (a quarter held out to score the "
                   "model before and after)")  # fmt: skip
    p.add_argument(
        "--label-share",
        type=float,
        default=0.3,
        help="share of the training pool the labelled candidates make (0.3)",
    )
    p.add_argument(
        "--before",
        type=Path,
        default=None,
        metavar="MODEL",
        help="with --labels: the model to compare with (default: the shipped one)",
    )
    p.add_argument(
        "--evaluate",
        action="store_true",
        help="afterwards measure recall / false positives on a held-out set and write them "
        "into the validation section of --out's MODEL_CARD.md (needs both models in --out)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # lazy: keeps drafts --help fast
    from drafts_ops.training import train

    train.require_torch()
    if args.steps is not None and args.steps < 1:
        raise ParameterError(f"--steps {args.steps} must be >= 1")
    if args.pool is not None and args.pool < 2:
        raise ParameterError(f"--pool {args.pool} must be >= 2")
    kwargs = {"seed": args.seed, "out": args.out, "device": args.device}
    if args.steps is not None:
        kwargs["steps"] = args.steps
    if args.pool is not None:
        kwargs["pool_size"] = args.pool
    if args.pool_cache is not None:
        kwargs["pool_cache"] = args.pool_cache
    if args.labels:
        if args.model != "classifier":
            raise ParameterError("--labels trains the classifier: drafts train classifier")
        from drafts_ops.training.labelled import labelled_set

        if not 0 < args.label_share < 1:
            raise ParameterError(f"--label-share {args.label_share} must be between 0 and 1")
        kwargs.update(labelled=labelled_set(args.labels), label_share=args.label_share,
                      before_model=args.before)  # fmt: skip
    fn = train.train_detector if args.model == "detector" else train.train_classifier
    result = fn(**kwargs)
    print(
        f"{result.kind}: {result.path} ({result.size_bytes / 1024:.0f} kB), "
        f"data {result.seconds_data:.0f} s, training {result.seconds_train:.0f} s, "
        f"final loss {result.final_loss:.4f}"
    )
    from drafts_ops.training.card import write_training_sections

    card = write_training_sections(args.out)  # the recipe and the table of trained models
    if args.evaluate:
        from drafts_ops.evaluation.networks import evaluate_and_write_card

        evaluate_and_write_card(args.out)
    print(f"model card: {card}")
    return 0
