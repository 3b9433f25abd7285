"""Metropolis-adjusted Langevin algorithm (MALA; Roberts & Tweedie 1996, Eq. 2.2-2.3).

The proposal is one step of the library's Langevin kernel, :func:`langevin_step` itself:
``y = x − ½ s² ∇E(x) + s ξ``, i.e. ``q(y | x) = N(y; x − ½ s² ∇E(x), s² I)``; it is accepted
by the shared Metropolis–Hastings step with probability
``min(1, exp(−E(y) + E(x)) q(x | y) / q(y | x))``, so the chain leaves ``p(x) ∝ exp(−E(x))``
exactly invariant whatever the step size. Kernel shape
``mala_step(energy, state, *, step_size, generator) -> (state, info)`` (blackjax style); the
state carries the energy and its gradient at the current position, so each step costs one
energy-and-gradient evaluation.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from shortrun.samplers.driver import iterate_mh
from shortrun.samplers.langevin import (
    EnergyFn,
    GradientState,
    energy_grad,
    gradient_state,
    langevin_step,
)
from shortrun.samplers.metropolis import MCMCInfo, mh_select

__all__ = ["MALAInfo", "MALAState", "MCMCInfo", "mala", "mala_init", "mala_step"]


MALAState = GradientState  # position, energy and gradient (shared with the other kernel)


class MALAInfo(NamedTuple):
    """Per chain: whether the proposal was accepted, and the proposal itself."""

    is_accepted: torch.Tensor
    proposal: torch.Tensor


mala_init = gradient_state


def _log_q(to: torch.Tensor, frm: torch.Tensor, grad_frm: torch.Tensor, s: float) -> torch.Tensor:
    """``log N(to; frm − ½ s² ∇E(frm), s² I)`` up to the constant, which cancels."""
    diff = to - frm + (0.5 * s * s) * grad_frm
    return -(diff.flatten(1) ** 2).sum(1) / (2 * s * s)


def mala_step(energy_fn: EnergyFn, state: MALAState, *, step_size: float,
              generator: torch.Generator | None = None) -> tuple[MALAState, MALAInfo]:
    """One MALA transition of every chain in ``state``."""
    s = step_size
    y, _ = langevin_step(energy_fn, state.x, s, 1.0, generator=generator,
                         cached=(state.energy, state.grad))
    energy_y, grad_y = energy_grad(energy_fn, y)
    proposal = MALAState(y, energy_y.detach(), grad_y)
    log_alpha = ((state.energy - proposal.energy)
                 + _log_q(state.x, y, grad_y, s) - _log_q(y, state.x, state.grad, s))
    new, accept = mh_select(log_alpha, proposal, state, generator)
    return new, MALAInfo(accept, y)


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
    return iterate_mh(lambda s: mala_step(energy_fn, s, step_size=step_size,
                                          generator=generator),
                      mala_init(energy_fn, x), n_steps)
