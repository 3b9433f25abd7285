"""Block-Gibbs kernel of restricted Boltzmann machines (Hinton 2002; Geman & Geman 1984).

Given one layer the other factorises, so a sweep ``v → h ~ p(h|v) → v′ ~ p(v|h)`` at inverse
temperature β is two matrix multiplies plus elementwise sigmoids / Gaussian noise. The kernel
has the library's one shape, ``gibbs_step(energy, state, *, beta, generator) -> (state,
info)``: the energy is an RBM energy object exposing its conditionals
(:mod:`shortrun.energies.rbm`), passed at call time; the kernel owns nothing.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from shortrun.energies.rbm import Beta, RBMParams, bernoulli, is_one
from shortrun.samplers.driver import iterate


class GibbsState(NamedTuple):
    """A chain's visible state ``v``, the hidden input ``a = β(c + Wᵀv)`` there (its softplus
    gives the free energy) and ``h_prob = σ(a) = p(h=1 | v)``."""

    v: torch.Tensor
    h_input: torch.Tensor
    h_prob: torch.Tensor


class GibbsInfo(NamedTuple):
    """The hidden sample ``h ~ p(h | v)`` the sweep went through."""

    h: torch.Tensor


def hidden_state(energy: RBMParams, v: torch.Tensor, beta: Beta = 1.0) -> GibbsState:
    """``GibbsState`` at ``v`` without moving: one matrix multiply and a sigmoid."""
    a = energy.hidden_input(v)
    if not is_one(beta):
        a = a * beta
    return GibbsState(v, a, torch.sigmoid(a))


gibbs_init = hidden_state


def gibbs_step(energy: RBMParams, state: GibbsState, *, beta: Beta = 1.0,
               generator: torch.Generator | None = None) -> tuple[GibbsState, GibbsInfo]:
    """One sweep ``v → h → v′`` at inverse temperature ``beta`` (a float, or a tensor
    broadcasting against ``(B, 1)`` for one β per chain)."""
    h = bernoulli(state.h_prob, generator)
    return hidden_state(energy, energy.sample_visible(h, beta, generator), beta), GibbsInfo(h)


def block_gibbs(energy: RBMParams, v: torch.Tensor | GibbsState, n_steps: int,
                beta: Beta = 1.0, generator: torch.Generator | None = None) -> GibbsState:
    """``n_steps`` sweeps of :func:`gibbs_step` from ``v``.

    ``v`` may be a :class:`GibbsState` the caller already has (the positive phase of CD does),
    saving one matrix multiply. Returns the final ``v`` with its hidden input and ``p(h|v)``
    — the statistics the CD/PCD update needs (Hinton 2002, Eq. 5).
    """
    if n_steps < 0:
        raise ValueError(f"block_gibbs: n_steps must be >= 0; got {n_steps}")
    state = v if isinstance(v, GibbsState) else hidden_state(energy, v, beta)
    return iterate(lambda s: gibbs_step(energy, s, beta=beta, generator=generator),
                   state, n_steps)[0]
