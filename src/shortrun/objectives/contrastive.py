"""The maximum-likelihood (contrastive) objective every MCMC-trained EBM shares.

For ``p_θ(x) = exp(−E_θ(x)) / Z_θ``,
``∇θ log p_θ(x) = E_{p_θ}[∇θ E_θ] − ∇θ E_θ(x)``: lower the energy at the data (positive phase),
raise it at model samples (negative phase). Minimising
``mean E(x⁺) − mean E(x⁻)`` with the negatives held fixed follows exactly the negative of
that gradient; what differs between models is only where ``x⁻`` comes from.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class LossOutput(NamedTuple):
    """``loss`` to minimise, scalar ``metrics`` to log, and the negatives used (if any)."""

    loss: torch.Tensor
    metrics: dict[str, float]
    x_neg: torch.Tensor | None = None


def contrastive_loss(
    energy_pos: torch.Tensor,
    energy_neg: torch.Tensor,
    *,
    energy_reg: float = 0.0,
    weights_neg: torch.Tensor | None = None,
    x_neg: torch.Tensor | None = None,
) -> LossOutput:
    """``mean E(x⁺) − mean E(x⁻) + λ (mean E(x⁺)² + mean E(x⁻)²)``.

    ``energy_reg`` λ is the squared-energy regulariser of Du & Mordatch (2019, §3.3).
    ``weights_neg`` (summing to 1) replaces the negative-phase mean by a weighted one, e.g. the
    exact model probabilities on an enumerable space. Metrics: ``energy_pos``, ``energy_neg``,
    ``energy_gap`` = energy_neg − energy_pos (positive when data sits below the negatives).
    """
    pos = energy_pos.mean()
    neg = energy_neg.mean() if weights_neg is None else (weights_neg * energy_neg).sum()
    loss = pos - neg
    if energy_reg:
        loss = loss + energy_reg * ((energy_pos**2).mean() + (energy_neg**2).mean())
    metrics = {
        "loss": float(loss.detach()),
        "energy_pos": float(pos.detach()),
        "energy_neg": float(neg.detach()),
        "energy_gap": float((neg - pos).detach()),
    }
    return LossOutput(loss, metrics, x_neg)
