"""Model (checkpoint) and σ′ selection for LEBM anomaly detection, on validation only.

The successor paper's code (Yu et al. 2023) picks its checkpoint by test AUPRC; we do not.
Selection sees only validation terms (:meth:`LEBM.anomaly_terms` of the validation split that
``data.anomaly_val_digit`` carves out of the *training* part: a held-out slice of the normal
training images plus the training images of a second digit; docs/lebm.md). The chosen
``(step, σ′)`` is then applied once to the test split, which stays bit-exactly the papers'.

Variants chosen here (each its own choice):

- ``joint``: the paper's score at the trained σ; only the checkpoint is chosen;
- ``joint_sigma``: the joint score with the reconstruction weighted as σ′ from ``sigmas``
  (post hoc, like bench/lebm_anomaly_terms.py); checkpoint and σ′ chosen together;
- ``tilt`` and ``unweighted``: the checkpoint is chosen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import torch

from shortrun.errors import ConfigError
from shortrun.metrics.anomaly import auprc
from shortrun.models.lebm import anomaly_scores_from_terms

SIGMAS = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0)
VARIANTS = ("joint", "joint_sigma", "tilt", "unweighted")

Terms = Mapping[str, torch.Tensor]


@dataclass(frozen=True)
class Choice:
    """What validation chose for one variant: the checkpoint ``step``, the σ′ of the
    reconstruction term (joint variants), and the validation AP that chose it."""

    variant: str
    step: int
    sigma: float | None
    val_auprc: float

    def as_dict(self) -> dict:
        return asdict(self)


def variant_scores(terms: Terms, variant: str, sigma: float | None) -> torch.Tensor:
    """The scores of ``variant`` (``joint_sigma`` is the joint score at ``sigma``)."""
    if variant in ("joint", "joint_sigma"):
        return anomaly_scores_from_terms(terms, float(sigma))["joint"]
    return anomaly_scores_from_terms(terms, 1.0)[variant]


def select(val: Mapping[int, tuple[Terms, torch.Tensor]], trained_sigma: float,
           sigmas: tuple[float, ...] = SIGMAS, variants: tuple[str, ...] = VARIANTS,
           ) -> dict[str, Choice]:
    """Best ``(step, σ′)`` per variant by validation average precision.

    ``val`` maps a checkpoint step to ``(terms, labels)`` of the validation split at that
    step (labels: 1 = the validation anomaly digit). Ties go to the earliest step and the
    smallest σ′, so the choice is deterministic."""
    if not val:
        raise ConfigError("anomaly selection: no validation terms; train with "
                          "data.anomaly_val_digit set and score its validation split")
    out = {}
    for variant in variants:
        grid = ((trained_sigma,) if variant == "joint" else
                tuple(sigmas) if variant == "joint_sigma" else (None,))
        best: Choice | None = None
        for step in sorted(val):
            terms, labels = val[step]
            for sigma in grid:
                ap = auprc(variant_scores(terms, variant, sigma), labels)
                if best is None or ap > best.val_auprc:
                    best = Choice(variant, int(step), sigma, ap)
        out[variant] = best
    return out
