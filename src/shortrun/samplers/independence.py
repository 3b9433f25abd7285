"""Independence Metropolis–Hastings jumps (Tierney 1994, "Markov chains for exploring posterior
distributions", §2.3.1): propose ``y ~ q`` independently of the state and accept with
probability ``min(1, exp(E(x) − E(y)) q(x) / q(y))`` through the shared Metropolis–Hastings
step.

Interleaved with Langevin, these moves let chains cross between well-separated modes, which
Langevin alone never does; the combined chain still leaves ``p ∝ exp(−E)`` invariant. Each
proposal costs one energy evaluation without a gradient. Kernel shape
``independence_step(energy, state, *, propose, log_q, generator) -> (state, info)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from shortrun.samplers.driver import iterate_mh
from shortrun.samplers.langevin import EnergyFn
from shortrun.samplers.metropolis import MCMCInfo, mh_select

LogDensity = Callable[[torch.Tensor], torch.Tensor]


class IndependenceState(NamedTuple):
    """Position ``x`` of every chain, with ``E(x)`` and ``log q(x)`` there."""

    x: torch.Tensor
    energy: torch.Tensor
    log_q: torch.Tensor


class IndependenceInfo(NamedTuple):
    """Per chain: whether the proposal was accepted."""

    is_accepted: torch.Tensor


def noise_log_density(source) -> LogDensity:
    """``log q`` (up to a constant) of a :class:`~shortrun.samplers.sources.NoiseSource`."""
    if source.kind == "uniform":
        def log_q(x: torch.Tensor) -> torch.Tensor:
            flat = x.flatten(1)
            inside = ((flat >= source.low) & (flat <= source.high)).all(1)
            return torch.where(inside, 0.0, -float("inf")).to(flat)
        return log_q
    return lambda x: -(x.flatten(1) ** 2).sum(1) / (2 * source.std**2)


@torch.no_grad()
def independence_init(energy_fn: EnergyFn, x: torch.Tensor, log_q: LogDensity
                      ) -> IndependenceState:
    x = x.detach()
    return IndependenceState(x, energy_fn(x), log_q(x))


@torch.no_grad()
def independence_step(
    energy_fn: EnergyFn,
    state: IndependenceState,
    *,
    propose: Callable[[int], torch.Tensor],
    log_q: LogDensity,
    generator: torch.Generator | None = None,
) -> tuple[IndependenceState, IndependenceInfo]:
    """One independence-MH move of every chain; ``propose(n)`` draws ``n`` states from ``q``."""
    y = propose(state.x.shape[0]).to(state.x)
    proposal = IndependenceState(y, energy_fn(y), log_q(y))
    log_alpha = (state.energy - proposal.energy) + (state.log_q - proposal.log_q)
    new, accept = mh_select(log_alpha, proposal, state, generator)
    return new, IndependenceInfo(accept)


def independence_mh(
    energy_fn: EnergyFn,
    x: torch.Tensor,
    propose: Callable[[int], torch.Tensor],
    log_q: LogDensity,
    n_proposals: int = 1,
    *,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, MCMCInfo]:
    """``n_proposals`` independence-MH moves of every chain; ``propose(n)`` draws from ``q``."""
    if n_proposals < 1:
        raise ValueError(f"n_proposals must be >= 1; got {n_proposals}")
    return iterate_mh(lambda s: independence_step(energy_fn, s, propose=propose, log_q=log_q,
                                                  generator=generator),
                      independence_init(energy_fn, x, log_q), n_proposals)
