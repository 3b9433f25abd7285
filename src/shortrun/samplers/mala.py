"""Metropolis-adjusted Langevin algorithm (MALA; Roberts & Tweedie 1996, Eq. 2.2-2.3).

The proposal is exactly one step of the library's Langevin kernel,
``y = x − ½ s² ∇E(x) + s ξ``, i.e. ``q(y | x) = N(y; x − ½ s² ∇E(x), s² I)``; it is accepted
with probability ``min(1, exp(−E(y) + E(x)) q(x | y) / q(y | x))``, so the chain leaves
``p(x) ∝ exp(−E(x))`` exactly invariant whatever the step size. Pure function of
(energy, state, rng) in the blackjax style; the energy's gradient at the current state is
carried between steps so each step costs one energy-and-gradient evaluation.
"""

from __future__ import annotations

import torch

from shortrun.samplers.langevin import EnergyFn, energy_grad
from shortrun.samplers.metropolis import MCMCInfo, mh_accept, where_rows

__all__ = ["MCMCInfo", "mala"]


def _log_q(to: torch.Tensor, frm: torch.Tensor, grad_frm: torch.Tensor, s: float) -> torch.Tensor:
    """``log N(to; frm − ½ s² ∇E(frm), s² I)`` up to the constant, which cancels."""
    diff = to - frm + (0.5 * s * s) * grad_frm
    return -(diff.flatten(1) ** 2).sum(1) / (2 * s * s)


def mala(
    energy_fn: EnergyFn,
    x: torch.Tensor,
    n_steps: int,
    step_size: float,
    *,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, MCMCInfo]:
    """Run ``n_steps`` MALA transitions of every chain in the batch ``x``."""
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1; got {n_steps}")
    if step_size <= 0:
        raise ValueError(f"step_size must be > 0; got {step_size}")
    s = step_size
    x = x.detach()
    energy, grad = energy_grad(energy_fn, x)
    energy = energy.detach()
    accepted = torch.zeros(x.shape[0], device=x.device)
    for _ in range(n_steps):
        noise = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
        y = x - (0.5 * s * s) * grad + s * noise
        energy_y, grad_y = energy_grad(energy_fn, y)
        energy_y = energy_y.detach()
        log_alpha = (energy - energy_y) + _log_q(x, y, grad_y, s) - _log_q(y, x, grad, s)
        accept = mh_accept(log_alpha, generator)
        x = where_rows(accept, y, x)
        grad = where_rows(accept, grad_y, grad)
        energy = torch.where(accept, energy_y, energy)
        accepted += accept.float()
    return x, MCMCInfo(accepted / n_steps, energy)
