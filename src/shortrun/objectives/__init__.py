"""Objectives: positives/negatives (or data alone) → a loss and the metrics users watch."""

from shortrun.objectives.contrastive import LossOutput, contrastive_loss
from shortrun.objectives.energy_discrepancy import energy_discrepancy, perturb
from shortrun.objectives.nce import (
    CustomNoise,
    GaussianNoise,
    NoiseDistribution,
    UniformNoise,
    nce_loss,
)

__all__ = ["CustomNoise", "GaussianNoise", "LossOutput", "NoiseDistribution", "UniformNoise",
           "contrastive_loss", "energy_discrepancy", "nce_loss", "perturb"]
