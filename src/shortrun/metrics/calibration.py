"""Expected calibration error and the reliability diagram (Guo et al. 2017, §2, Eq. 3).

Predictions are binned by their confidence ``max_y p(y|x)`` into ``n_bins`` equal-width bins
of ``(0, 1]``; ``ECE = Σ_b (n_b / n) |acc(b) − conf(b)|``, the gap between accuracy and mean
confidence weighted by the bin's share. The per-bin table is the reliability diagram.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class Reliability(NamedTuple):
    """``ece`` and, per bin, the mean confidence, the accuracy and the count (empty bins 0)."""

    ece: float
    confidence: list[float]
    accuracy: list[float]
    count: list[int]


def reliability(probs: torch.Tensor, labels: torch.Tensor, n_bins: int = 15) -> Reliability:
    """The ECE and reliability table of class probabilities ``probs`` ``(N, K)``."""
    if probs.dim() != 2 or len(probs) != len(labels) or len(probs) == 0:
        raise ValueError(f"reliability: expected probabilities (N, K) and N labels; got "
                         f"{tuple(probs.shape)} and {tuple(labels.shape)}")
    if n_bins < 1:
        raise ValueError(f"reliability: n_bins must be >= 1; got {n_bins}")
    probs, labels = probs.double().cpu(), labels.long().cpu()
    conf, pred = probs.max(1)
    hit = (pred == labels).double()
    # bin b holds confidences in (b/n, (b+1)/n]; a confidence of exactly 0 joins bin 0
    which = (torch.ceil(conf * n_bins).long() - 1).clamp(0, n_bins - 1)
    count = torch.bincount(which, minlength=n_bins)
    conf_sum = torch.bincount(which, weights=conf, minlength=n_bins)
    hit_sum = torch.bincount(which, weights=hit, minlength=n_bins)
    safe = count.clamp_min(1).double()
    mean_conf, acc = conf_sum / safe, hit_sum / safe
    ece = float(((count.double() / len(probs)) * (acc - mean_conf).abs()).sum())
    return Reliability(ece, mean_conf.tolist(), acc.tolist(), count.tolist())


def expected_calibration_error(probs: torch.Tensor, labels: torch.Tensor,
                               n_bins: int = 15) -> float:
    return reliability(probs, labels, n_bins).ece


def reliability_summary(confidence: list[float], accuracy: list[float],
                        count: list[int]) -> str:
    """One line for a reliability table (what ``shortrun eval`` prints in place of the table):
    how many bins hold predictions, in how many the model is over- or under-confident
    (mean confidence above or below the bin's accuracy), and the largest gap."""
    filled = [(c, a) for c, a, n in zip(confidence, accuracy, count, strict=True) if n > 0]
    if not filled:
        return f"{len(count)} bins, 0 filled"
    over = sum(c > a for c, a in filled)
    under = sum(c < a for c, a in filled)
    conf, acc = max(filled, key=lambda ca: abs(ca[0] - ca[1]))
    return (f"{len(count)} bins, {len(filled)} filled: {over} over-, {under} under-confident; "
            f"max gap {abs(conf - acc):.3g} at confidence {conf:.3g}")
