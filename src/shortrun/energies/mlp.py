"""MLP energy for low-dimensional data.

With SiLU activations (the default) it also offers :meth:`MLPEnergy.energy_and_grad`, the energy
and its input gradient in one explicit forward-and-backward pass under ``no_grad`` (no autograd
graph); the Langevin kernel uses it when present, which is where most of a chain's time goes.
It is checked against autograd in the tests (tests/energies/test_mlp_energy.py). Its matrix
products are plain ``F.linear`` calls.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# ``aten.silu_backward`` is ATen's fused SiLU derivative (one pass, what autograd itself runs). It
# is not public API, so a torch without it gets the same derivative from public element-wise ops:
# silu'(z) = σ(z) (1 + z (1 − σ(z))).
_FUSED_SILU_BACKWARD: bool = hasattr(torch.ops.aten, "silu_backward")


def _silu_backward(g: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """``g ⊙ silu′(z)``."""
    if _FUSED_SILU_BACKWARD:
        return torch.ops.aten.silu_backward(g, z)
    s = torch.sigmoid(z)
    return g * s * (1 + z * (1 - s))


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

    #: rows per block of the fast pass on CPU; a 2,048 × 128 float32 activation (1 MiB) stays
    #: in L2 (a GPU takes all rows at once)
    block_rows: int = 2048

    @torch.no_grad()
    def energy_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(E(x), ∇ₓE(x))`` without autograd, or None where only autograd applies.

        One forward pass keeps the pre-activations ``zₗ``; the backward pass is the chain rule
        written out, ``g ← (g ⊙ silu′(zₗ)) Wₗ`` from ``g = w_out``, with ATen's fused
        ``silu_backward`` (one pass, as autograd does) and no graph bookkeeping. Rows are done
        in blocks of :attr:`block_rows` so that the activations stay in cache.
        """
        # Under autocast (train.precision=bf16) autograd applies the cast policy op by op;
        # the hand-written pass would mix dtypes, so it steps aside.
        if not self._fast_grad or torch.is_autocast_enabled(x.device.type):
            return None
        flat = x.flatten(1)
        energy, grad = self._fast_pass(flat)
        return energy, grad.reshape(x.shape)

    def _fast_pass(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The fast pass over ``(n, d)`` rows, block by block on CPU."""
        linears = [m for m in self.net if isinstance(m, nn.Linear)]
        n = flat.shape[0]
        # Backward products g @ W = linear(g, Wᵀ), with Wᵀ a view (no copy).
        weights_t = [lin.weight.t() for lin in linears[:-1]]
        last = linears[-1]
        w_out, b_out = last.weight[0], last.bias
        # blocks keep a CPU's activations in cache; on a GPU they only multiply the kernel
        # launches (bench/README.md)
        if n <= self.block_rows or flat.device.type != "cpu":
            return self._energy_and_grad_rows(flat, linears, weights_t, w_out, b_out)
        energy = flat.new_empty(n)
        grad = torch.empty_like(flat)
        blocks = -(-n // self.block_rows)
        bounds = [n * k // blocks for k in range(blocks + 1)]  # near-equal blocks
        for i, j in zip(bounds[:-1], bounds[1:], strict=True):
            e, g = self._energy_and_grad_rows(flat[i:j], linears, weights_t, w_out, b_out)
            energy[i:j] = e
            grad[i:j] = g
        return energy, grad

    @staticmethod
    def _energy_and_grad_rows(h, linears, weights_t, w_out, b_out):
        pre = []
        for lin in linears[:-1]:
            z = F.linear(h, lin.weight, lin.bias)
            pre.append(z)
            h = F.silu(z)
        energy = torch.addmv(b_out, h, w_out) if b_out is not None else h @ w_out
        g = w_out.expand(h.shape[0], -1)
        for w_t, z in zip(reversed(weights_t), reversed(pre), strict=True):
            g = F.linear(_silu_backward(g, z), w_t)
        return energy, g
