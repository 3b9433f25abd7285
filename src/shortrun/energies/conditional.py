"""Noise-conditional MLP energy ``E(x, σ)`` for denoising score matching over a σ ladder.

Following NCSNv2 (Song & Ermon 2020, §4 "Technique 3"), the output is divided by σ:
``E(x, σ) = f(x, log σ) / σ``, so ``σ∇ₓE = ∇ₓf`` has unit scale at every noise level and one
network serves the whole ladder. ``log σ`` enters every hidden layer as an additive
embedding.
"""

from __future__ import annotations

import torch
from torch import nn

from shortrun.energies.mlp import activation


class NoiseConditionalEnergy(nn.Module):
    """``forward(x, sigma)`` with ``sigma`` a float or a ``(B,)`` tensor; returns ``(B,)``."""

    def __init__(self, in_dim: int, hidden: int = 128, depth: int = 2, act: str = "silu") -> None:
        super().__init__()
        self.inputs = nn.ModuleList()
        self.embeds = nn.ModuleList()
        width = in_dim
        for _ in range(depth):
            self.inputs.append(nn.Linear(width, hidden))
            self.embeds.append(nn.Linear(1, hidden))
            width = hidden
        self.act = activation(act)
        self.out = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
        h = x.flatten(1)
        sigma = torch.as_tensor(sigma, dtype=h.dtype, device=h.device).expand(h.shape[0])
        log_sigma = sigma.log().unsqueeze(1)
        for lin, emb in zip(self.inputs, self.embeds, strict=True):
            h = self.act(lin(h) + emb(log_sigma))
        return self.out(h).squeeze(1) / sigma


class AtSigma(nn.Module):
    """The unconditional energy ``x ↦ E(x, σ)`` at one fixed noise level."""

    def __init__(self, energy: NoiseConditionalEnergy, sigma: float) -> None:
        super().__init__()
        self.energy, self.sigma = energy, float(sigma)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.energy(x, self.sigma)
