"""MLP energy for low-dimensional data."""

from __future__ import annotations

import torch
from torch import nn

ACTIVATIONS = {"silu": nn.SiLU, "gelu": nn.GELU, "relu": nn.ReLU, "elu": nn.ELU,
               "lrelu": lambda: nn.LeakyReLU(0.2), "tanh": nn.Tanh, "softplus": nn.Softplus}


def activation(name: str) -> nn.Module:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]()


class MLPEnergy(nn.Module):
    """``E(x) = MLP(flatten(x))`` with ``depth`` hidden layers of width ``hidden``."""

    def __init__(self, in_dim: int, hidden: int = 128, depth: int = 2,
                 act: str = "silu", spectral_norm: bool = False) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = in_dim
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), activation(act)]
            width = hidden
        layers.append(nn.Linear(width, 1))
        if spectral_norm:
            layers = [nn.utils.parametrizations.spectral_norm(m) if isinstance(m, nn.Linear)
                      else m for m in layers]
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1)).squeeze(1)
