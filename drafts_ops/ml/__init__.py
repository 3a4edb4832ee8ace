"""DRAFTS-style neural models: a DM-time detector and a burst classifier.

Inference (:mod:`drafts_ops.ml.inference`) needs only ONNX Runtime and the shipped
``models/*.onnx``; training (:mod:`drafts_ops.training.train`, ``drafts train``) needs the
``train`` extra (PyTorch). Nothing here imports torch at package import time.
"""

from __future__ import annotations

from typing import Literal

#: The trainable models (``drafts train`` choices).
ModelKind = Literal["detector", "classifier"]
MODEL_KINDS: tuple[ModelKind, ...] = ("detector", "classifier")
