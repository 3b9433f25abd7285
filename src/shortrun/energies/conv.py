"""Small convolutional / ResNet energy for 28×28 and 32×32 images.

A stem convolution, two stages of (residual block → strided 4×4 downsampling), global average
pooling and a linear read-out, in the spirit of the IGEBM energy (Du & Mordatch 2019, App. A)
shrunk to train on a CPU. Smooth activations (SiLU) keep ``∇ₓE`` smooth for Langevin;
spectral normalisation (Miyato et al. 2018) is optional.
"""

from __future__ import annotations

import torch
from torch import nn

from shortrun.energies.mlp import activation


def _maybe_sn(module: nn.Module, on: bool) -> nn.Module:
    return nn.utils.parametrizations.spectral_norm(module) if on else module


class ResBlock(nn.Module):
    """``x + conv(act(conv(act(x))))`` at constant width and resolution."""

    def __init__(self, width: int, act: str, spectral_norm: bool) -> None:
        super().__init__()
        self.body = nn.Sequential(
            activation(act), _maybe_sn(nn.Conv2d(width, width, 3, 1, 1), spectral_norm),
            activation(act), _maybe_sn(nn.Conv2d(width, width, 3, 1, 1), spectral_norm))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class ConvEnergy(nn.Module):
    """``(B, C, H, W) → (B,)``; width ``nf`` doubles at each of the two downsamplings."""

    def __init__(self, in_channels: int = 1, nf: int = 32, act: str = "silu",
                 spectral_norm: bool = False, residual: bool = True) -> None:
        super().__init__()
        layers: list[nn.Module] = [_maybe_sn(nn.Conv2d(in_channels, nf, 3, 1, 1), spectral_norm)]
        width = nf
        for _ in range(2):
            if residual:
                layers.append(ResBlock(width, act, spectral_norm))
            layers += [activation(act),
                       _maybe_sn(nn.Conv2d(width, 2 * width, 4, 2, 1), spectral_norm)]
            width *= 2
        layers.append(activation(act))
        self.features = nn.Sequential(*layers)
        self.head = _maybe_sn(nn.Linear(width, 1), spectral_norm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.features(x).mean(dim=(2, 3))
        return self.head(h).squeeze(1)
