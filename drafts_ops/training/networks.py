"""The two DRAFTS-style networks (PyTorch; training only — inference runs their ONNX export).

* :class:`DetectorNet` — a small CenterNet: a fully convolutional backbone at stride 4 with
  dilated context layers, a heatmap head (burst centres in DM-time) and an offset head
  (sub-cell position). Input ``[B, 1, 64, W]`` (W a multiple of 16, any length).
* :class:`ClassifierNet` — two small convolutional branches, one for the dedispersed
  frequency-time cutout and one for the DM-time cutout (as FETCH), joined by a linear
  layer that returns a logit. Inputs ``[B, 1, 64, 64]`` each.

Import this module only from training code: it needs the ``train`` extra (torch).
"""

from __future__ import annotations

import torch
from torch import nn


def _conv(cin: int, cout: int, stride: int = 1, dilation: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=dilation, dilation=dilation, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class DetectorNet(nn.Module):
    """CenterNet-style detector: returns (heatmap logits [B,1,H/4,W/4], offsets [B,2,H/4,W/4]).

    ``width`` 8 (channels 4, 8, 16; 11 k parameters): ONNX Runtime computes convolutions
    in blocks of 16 channels on AVX-512, so width 12 ran as slowly as the earlier width 16
    (9.4 against 9.1 ms per 64 x 4096 tile, random weights) and width 8 in 0.5-0.7 of the
    time, with the same recall on a validation seed (README "Detection", model card).
    """

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        w = width
        self.backbone = nn.Sequential(
            _conv(1, w // 2),
            _conv(w // 2, w, stride=2),
            _conv(w, 2 * w, stride=2),
            _conv(2 * w, 2 * w, dilation=2),
            _conv(2 * w, 2 * w, dilation=4),
            _conv(2 * w, 2 * w, dilation=8),
        )
        self.heatmap = nn.Sequential(_conv(2 * w, w), nn.Conv2d(w, 1, 1))
        self.offset = nn.Sequential(_conv(2 * w, w), nn.Conv2d(w, 2, 1))
        # CenterNet's prior: start with a low heatmap everywhere (p ~ 0.01).
        nn.init.constant_(self.heatmap[-1].bias, -4.6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.backbone(x)
        return self.heatmap(f), torch.sigmoid(self.offset(f))


def _branch(w: int) -> nn.Sequential:
    return nn.Sequential(
        _conv(1, w),
        nn.MaxPool2d(2),
        _conv(w, 2 * w),
        nn.MaxPool2d(2),
        _conv(2 * w, 2 * w),
        nn.MaxPool2d(2),
        _conv(2 * w, 4 * w),
        nn.AdaptiveMaxPool2d(1),
        nn.Flatten(),
    )


class ClassifierNet(nn.Module):
    """Burst / not-burst classifier on (freq-time, DM-time) cutouts; returns logits [B]."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.freq_time = _branch(width)
        self.dm_time = _branch(width)
        self.head = nn.Sequential(
            nn.Linear(8 * width, 32), nn.ReLU(inplace=True), nn.Dropout(0.1), nn.Linear(32, 1)
        )

    def forward(self, freq_time: torch.Tensor, dm_time: torch.Tensor) -> torch.Tensor:
        feats = torch.cat([self.freq_time(freq_time), self.dm_time(dm_time)], dim=1)
        return self.head(feats).squeeze(1)


class ClassifierExport(nn.Module):
    """The classifier as exported: returns probabilities instead of logits."""

    def __init__(self, net: ClassifierNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, freq_time: torch.Tensor, dm_time: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.net(freq_time, dm_time))


class DetectorExport(nn.Module):
    """The detector as exported: heatmap probabilities and offsets."""

    def __init__(self, net: DetectorNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        heat, offset = self.net(x)
        return torch.sigmoid(heat), offset
