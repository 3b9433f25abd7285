"""MLP energy for low-dimensional data.

With SiLU activations (the default) it also offers :meth:`MLPEnergy.energy_and_grad`, the input
gradient by an explicit backward pass under ``no_grad`` (no autograd graph); the Langevin kernel
uses it when present, which is where most of a chain's time goes. It is checked against
autograd in the tests.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
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
        self._fast_grad = act == "silu" and not spectral_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1)).squeeze(1)

    @torch.no_grad()
    def energy_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(E(x), ∇ₓE(x))`` without autograd, or None where only autograd applies.

        The backward pass uses ATen's fused ``silu_backward`` (one pass over the activations,
        as autograd does) but skips autograd's graph bookkeeping; that is the whole gain.
        """
        if not self._fast_grad:
            return None
        linears = [m for m in self.net if isinstance(m, nn.Linear)]
        h = x.flatten(1)
        pre = []
        for lin in linears[:-1]:
            z = F.linear(h, lin.weight, lin.bias)
            pre.append(z)
            h = F.silu(z)
        last = linears[-1]
        energy = F.linear(h, last.weight, last.bias).squeeze(1)
        g = last.weight.expand(h.shape[0], -1)
        for lin, z in zip(reversed(linears[:-1]), reversed(pre), strict=True):
            g = torch.ops.aten.silu_backward(g, z) @ lin.weight
        return energy, g.reshape(x.shape)
