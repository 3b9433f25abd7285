"""Parallel tempering (replica exchange) for RBMs over a ladder of inverse temperatures.

Replica ``t`` targets ``p_βt(v) ∝ Σ_h exp(−β_t E(v, h)) = exp(−F_βt(v))`` (see
:mod:`shortrun.energies.rbm`); β_0 = 1 is the model, lower β are flatter and mix fast. Each
sweep (:func:`tempering_step`) moves every replica by one block-Gibbs step at its own β (one
batched pair of matrix multiplies over all replicas), then (:func:`swap_step`) proposes
swapping the states of neighbouring replicas (t, t+1), alternately the even and the odd pairs
(deterministic even-odd scheme), accepted by the shared Metropolis–Hastings step with
probability ``min(1, exp(F_βt(x_t) + F_βt+1(x_t+1) − F_βt(x_t+1) − F_βt+1(x_t)))``
(Swendsen & Wang 1986; used for RBM training by Desjardins et al. 2010 and Cho et al. 2010).

Both are kernels of the library's shape ``kernel(energy, state, *, betas, generator) ->
(state, info)``. Persistent replicas live in a chain source,
:class:`~shortrun.samplers.sources.TemperedChains`, whose buffers are checkpointed.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from shortrun.energies.rbm import RBMParams
from shortrun.samplers.gibbs import block_gibbs
from shortrun.samplers.metropolis import mh_accept


class TemperingState(NamedTuple):
    """``replicas[t, c]`` is chain ``c``'s state at inverse temperature ``betas[t]``;
    ``parity`` says which neighbour pairs the next swap proposes (0: (0,1), (2,3), …;
    1: (1,2), (3,4), …)."""

    replicas: torch.Tensor
    parity: int


class SwapInfo(NamedTuple):
    """``pairs``: the lower index ``t`` of every proposed pair (t, t+1); ``is_accepted``:
    one boolean per (pair, chain)."""

    pairs: torch.Tensor
    is_accepted: torch.Tensor

    @property
    def rate(self) -> float:
        """Fraction of the proposed swaps that were accepted (0 when none was proposed)."""
        n = self.is_accepted.numel()
        return float(self.is_accepted.double().sum()) / n if n else 0.0


def beta_ladder(n_temps: int, beta_min: float = 0.0) -> torch.Tensor:
    """``n_temps`` inverse temperatures spaced evenly from 1 down to ``beta_min``."""
    if n_temps < 2:
        raise ValueError(f"parallel tempering needs at least 2 temperatures; got {n_temps}")
    if not 0.0 <= beta_min < 1.0:
        raise ValueError(f"beta_min must be in [0, 1); got {beta_min}")
    return torch.linspace(1.0, beta_min, n_temps)


def swap_step(energy: RBMParams, state: TemperingState, *, betas: torch.Tensor,
              generator: torch.Generator | None = None) -> tuple[TemperingState, SwapInfo]:
    """Propose swapping neighbouring replicas (the pairs ``state.parity`` names)."""
    x = state.replicas
    T, C, D = x.shape
    first = int(state.parity)
    i = torch.arange(first, T - 1, 2, device=x.device)
    j = i + 1
    P = len(i)
    if P == 0:
        none = torch.zeros(0, C, dtype=torch.bool, device=x.device)
        return TemperingState(x, 1 - first), SwapInfo(i, none)
    bi = betas[i].repeat_interleave(C).to(x.dtype)
    bj = betas[j].repeat_interleave(C).to(x.dtype)
    xi, xj = x[i].reshape(P * C, D), x[j].reshape(P * C, D)
    log_alpha = (energy.free_energy(xi, bi) + energy.free_energy(xj, bj)
                 - energy.free_energy(xj, bi) - energy.free_energy(xi, bj))
    accept = mh_accept(log_alpha, generator).reshape(P, C)
    new = x.clone()
    new[i] = torch.where(accept[..., None], x[j], x[i])
    new[j] = torch.where(accept[..., None], x[i], x[j])
    return TemperingState(new, 1 - first), SwapInfo(i, accept)


def tempering_step(energy: RBMParams, state: TemperingState, *, betas: torch.Tensor,
                   generator: torch.Generator | None = None
                   ) -> tuple[TemperingState, SwapInfo]:
    """One sweep: a block-Gibbs step of every replica at its own β, then :func:`swap_step`."""
    x = state.replicas.to(energy.W.dtype)
    T, C, D = x.shape
    beta = betas.repeat_interleave(C)[:, None].to(x.dtype)
    moved = block_gibbs(energy, x.reshape(T * C, D), 1, beta, generator).v.reshape(T, C, D)
    return swap_step(energy, TemperingState(moved, state.parity), betas=betas,
                     generator=generator)
