"""Hamiltonian Monte Carlo with a leapfrog integrator (Neal 2011, "MCMC using Hamiltonian
dynamics", §5.2, Eq. 5.18-5.20 and the acceptance rule Eq. 3.6).

Hamiltonian ``H(x, p) = E(x) + ½‖p‖²`` (identity mass); each transition draws
``p ~ N(0, I)``, runs ``n_leapfrog`` leapfrog steps of size ``ε`` and accepts with probability
``min(1, exp(H(x, p) − H(x', p')))`` through the shared Metropolis–Hastings step. Leapfrog is
volume preserving and reversible, so the chain leaves ``p(x) ∝ exp(−E(x))`` exactly invariant.
One leapfrog step with ``ε = s`` is the same move as one MALA step with step size ``s``.
Kernel shape ``hmc_step(energy, state, *, step_size, n_leapfrog, generator) -> (state, info)``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from shortrun.samplers.driver import iterate_mh
from shortrun.samplers.langevin import EnergyFn, GradientState, energy_grad, gradient_state
from shortrun.samplers.metropolis import MCMCInfo, mh_select

HMCState = GradientState  # position, energy and gradient (shared with the other kernel)


class HMCInfo(NamedTuple):
    """Per chain: whether the end of the trajectory was accepted, and the energy there."""

    is_accepted: torch.Tensor
    proposal_energy: torch.Tensor


hmc_init = gradient_state


def _kinetic(p: torch.Tensor) -> torch.Tensor:
    return 0.5 * (p.flatten(1) ** 2).sum(1)


def hmc_step(energy_fn: EnergyFn, state: HMCState, *, step_size: float, n_leapfrog: int = 10,
             generator: torch.Generator | None = None) -> tuple[HMCState, HMCInfo]:
    """One HMC transition (``n_leapfrog`` leapfrog steps of ``step_size``) of every chain."""
    eps, x = step_size, state.x
    p0 = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
    q, g = x, state.grad
    p = p0 - (0.5 * eps) * g
    for k in range(n_leapfrog):
        q = q + eps * p
        e_q, g = energy_grad(energy_fn, q)
        if k < n_leapfrog - 1:
            p = p - eps * g
    p = p - (0.5 * eps) * g
    e_q = e_q.detach()
    log_alpha = (state.energy + _kinetic(p0)) - (e_q + _kinetic(p))
    new, accept = mh_select(log_alpha, HMCState(q, e_q, g), state, generator)
    return new, HMCInfo(accept, e_q)


def hmc(
    energy_fn: EnergyFn,
    x: torch.Tensor,
    n_steps: int,
    step_size: float,
    n_leapfrog: int = 10,
    *,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, MCMCInfo]:
    """Run ``n_steps`` HMC transitions (each ``n_leapfrog`` leapfrog steps of ``step_size``)."""
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1; got {n_steps}")
    if step_size <= 0:
        raise ValueError(f"step_size must be > 0; got {step_size}")
    if n_leapfrog < 1:
        raise ValueError(f"n_leapfrog must be >= 1; got {n_leapfrog}")
    return iterate_mh(lambda s: hmc_step(energy_fn, s, step_size=step_size,
                                         n_leapfrog=n_leapfrog, generator=generator),
                      hmc_init(energy_fn, x), n_steps)
