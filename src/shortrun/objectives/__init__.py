"""Objectives: positives/negatives (or data alone) → a loss and the metrics users watch."""

from shortrun.objectives.contrastive import LossOutput, contrastive_loss

__all__ = ["LossOutput", "contrastive_loss"]
