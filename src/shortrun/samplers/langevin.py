"""The one Langevin kernel of the library (unadjusted Langevin algorithm).

``x ← x − ½ s² ∇E(x) + s τ ξ``, ``ξ ~ N(0, I)``, with step size ``s`` and noise scale ``τ``.
``τ = 1`` is the Euler discretisation of the Langevin diffusion whose stationary law is
``p(x) ∝ exp(−E(x))``; ``τ < 1`` is the tempered chain some papers use (e.g. IGEBM).
The same function drives the data-space EBM, the LEBM prior and posterior chains
(Pang et al. 2020, Eq. 9-10) and the Dual-MCMC x- and z-chains (Cui & Han 2023).

The energy is passed at call time and never owned (blackjax style); parameters of the energy
receive no gradient, and no graph is built through the chain unless ``create_graph=True``.

:func:`langevin_step` has the shape every kernel of the library has,
``kernel(energy, state, *, <kernel params>, generator=None) -> (state, info)``. The chain
carries nothing but its position, so the state is the position tensor itself (as in
blackjax's SGLD); MALA (:mod:`shortrun.samplers.mala`) uses this step as its proposal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from shortrun.samplers.driver import iterate

EnergyFn = Callable[[torch.Tensor], torch.Tensor]


class LangevinInfo(NamedTuple):
    """Per-chain diagnostics of the last step: energy before it and gradient norm."""

    energy: torch.Tensor
    grad_norm: torch.Tensor


class GradientState(NamedTuple):
    """Position ``x`` of every chain, with ``E(x)`` and ``∇ₓE(x)`` there: the state of the
    gradient-based Metropolis kernels (MALA, HMC), so a step reuses the current energy and
    gradient instead of recomputing them."""

    x: torch.Tensor
    energy: torch.Tensor
    grad: torch.Tensor


def gradient_state(energy_fn: EnergyFn, x: torch.Tensor) -> GradientState:
    """The first :class:`GradientState` of chains at ``x``."""
    energy, grad = energy_grad(energy_fn, x.detach())
    return GradientState(x.detach(), energy.detach(), grad)


def energy_grad(
    energy_fn: EnergyFn, x: torch.Tensor, create_graph: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(E(x), ∇ₓ E(x))``; summing over the batch is exact since chains are independent.

    An energy that offers ``energy_and_grad(x)`` (e.g. the SiLU :class:`MLPEnergy`) is asked
    first, outside autograd, when no graph is wanted; it may return None to decline.
    """
    fast = getattr(energy_fn, "energy_and_grad", None)
    if fast is not None and not create_graph and not x.requires_grad:
        out = fast(x)
        if out is not None:
            return out
    with torch.enable_grad():
        if not x.requires_grad:
            x = x.detach().requires_grad_(True)
        energy = energy_fn(x)
        if energy.dim() != 1 or energy.shape[0] != x.shape[0]:
            raise ValueError(f"energy must map a batch of {x.shape[0]} to shape ({x.shape[0]},); "
                             f"got {tuple(energy.shape)}")
        (grad,) = torch.autograd.grad(energy.sum(), x, create_graph=create_graph)
    return energy, grad


def langevin_step(
    energy_fn: EnergyFn,
    x: torch.Tensor,
    step_size: float,
    noise_scale: float = 1.0,
    *,
    drift_clamp: float | None = None,
    domain: tuple[float, float] | None = None,
    generator: torch.Generator | None = None,
    create_graph: bool = False,
    cached: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, LangevinInfo]:
    """One transition. ``drift_clamp`` bounds each coordinate of ``½s²∇E``; ``domain`` clamps
    the state after the step (both are the stabilisers of IGEBM-style training). ``cached`` is
    ``(E(x), ∇E(x))`` when the caller already has them (MALA carries them between steps), so
    the step costs no energy evaluation."""
    if cached is not None:
        energy, grad = cached
    else:
        energy, grad = energy_grad(energy_fn, x, create_graph=create_graph)
    info = LangevinInfo(energy.detach(), grad.detach().flatten(1).norm(dim=1))
    half_s2, noise_std = 0.5 * step_size**2, step_size * noise_scale
    if create_graph:
        drift = half_s2 * grad
        if drift_clamp is not None:
            drift = drift.clamp(-drift_clamp, drift_clamp)
        x_new = x - drift
        if noise_scale > 0:
            noise = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
            x_new = x_new + noise_std * noise
        if domain is not None:
            x_new = x_new.clamp(domain[0], domain[1])
        return x_new, info
    # No graph: one fresh tensor for the new state, updated in place (x itself is not touched).
    if drift_clamp is None:
        x_new = torch.add(x.detach(), grad, alpha=-half_s2)
    else:
        x_new = x.detach() - (half_s2 * grad).clamp_(-drift_clamp, drift_clamp)
    if noise_scale > 0:
        noise = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
        x_new.add_(noise, alpha=noise_std)
    if domain is not None:
        x_new.clamp_(domain[0], domain[1])
    return x_new, info


def langevin(
    energy_fn: EnergyFn,
    x: torch.Tensor,
    n_steps: int,
    step_size: float,
    noise_scale: float = 1.0,
    *,
    drift_clamp: float | None = None,
    domain: tuple[float, float] | None = None,
    generator: torch.Generator | None = None,
    create_graph: bool = False,
    callback: Callable[[int, torch.Tensor, LangevinInfo], None] | None = None,
) -> tuple[torch.Tensor, LangevinInfo | None]:
    """Run ``n_steps`` transitions from ``x``; returns the final state and the last info.

    ``callback(step, x, info)`` sees every step (long-run energy traces use it).
    """
    if n_steps < 0:
        raise ValueError(f"n_steps must be >= 0; got {n_steps}")
    if step_size <= 0:
        raise ValueError(f"step_size must be > 0; got {step_size}")
    x = x if create_graph else x.detach()
    return iterate(lambda z: langevin_step(energy_fn, z, step_size, noise_scale,
                                           drift_clamp=drift_clamp, domain=domain,
                                           generator=generator, create_graph=create_graph),
                   x, n_steps, callback)
