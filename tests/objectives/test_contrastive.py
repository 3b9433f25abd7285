"""The contrastive objective by value (Du & Mordatch 2019, §3.3 for the regulariser)."""

from __future__ import annotations

import pytest
import torch

from shortrun.objectives.contrastive import contrastive_loss


def test_loss_and_metrics_by_hand():
    e_pos, e_neg = torch.tensor([1.0, 3.0]), torch.tensor([-2.0, 0.0, 5.0])
    out = contrastive_loss(e_pos, e_neg, energy_reg=0.5)
    # pos 2, neg 1, λ(mean E⁺² + mean E⁻²) = 0.5 (5 + 29/3)
    assert float(out.loss) == pytest.approx(2.0 - 1.0 + 0.5 * (5.0 + 29.0 / 3.0))
    assert out.metrics["energy_gap"] == pytest.approx(-1.0)
    assert float(contrastive_loss(e_pos, e_neg).loss) == pytest.approx(1.0)


def test_weighted_negative_phase():
    e_pos, e_neg = torch.tensor([0.0]), torch.tensor([2.0, 4.0])
    out = contrastive_loss(e_pos, e_neg, weights_neg=torch.tensor([0.25, 0.75]))
    assert float(out.loss) == pytest.approx(-3.5)
