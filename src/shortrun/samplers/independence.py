"""Independence Metropolis–Hastings jumps (Tierney 1994, "Markov chains for exploring posterior
distributions", §2.3.1): propose ``y ~ q`` independently of the state and accept with
probability ``min(1, exp(E(x) − E(y)) q(x) / q(y))``.

Interleaved with Langevin, these moves let chains cross between well-separated modes, which
Langevin alone never does; the combined chain still leaves ``p ∝ exp(−E)`` invariant. Each
proposal costs one energy evaluation without a gradient.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from shortrun.samplers.langevin import EnergyFn
from shortrun.samplers.metropolis import MCMCInfo, mh_accept, where_rows


def noise_log_density(source) -> Callable[[torch.Tensor], torch.Tensor]:
    """``log q`` (up to a constant) of a :class:`~shortrun.samplers.sources.NoiseSource`."""
    if source.kind == "uniform":
        def log_q(x: torch.Tensor) -> torch.Tensor:
            flat = x.flatten(1)
            inside = ((flat >= source.low) & (flat <= source.high)).all(1)
            return torch.where(inside, 0.0, -float("inf")).to(flat)
        return log_q
    return lambda x: -(x.flatten(1) ** 2).sum(1) / (2 * source.std**2)


@torch.no_grad()
def independence_mh(
    energy_fn: EnergyFn,
    x: torch.Tensor,
    propose: Callable[[int], torch.Tensor],
    log_q: Callable[[torch.Tensor], torch.Tensor],
    n_proposals: int = 1,
    *,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, MCMCInfo]:
    """``n_proposals`` independence-MH moves of every chain; ``propose(n)`` draws from ``q``."""
    if n_proposals < 1:
        raise ValueError(f"n_proposals must be >= 1; got {n_proposals}")
    x = x.detach()
    energy = energy_fn(x)
    log_q_x = log_q(x)
    accepted = torch.zeros(x.shape[0], device=x.device)
    for _ in range(n_proposals):
        y = propose(x.shape[0]).to(x)
        energy_y = energy_fn(y)
        log_q_y = log_q(y)
        log_alpha = (energy - energy_y) + (log_q_x - log_q_y)
        accept = mh_accept(log_alpha, generator)
        x = where_rows(accept, y, x)
        energy = torch.where(accept, energy_y, energy)
        log_q_x = torch.where(accept, log_q_y, log_q_x)
        accepted += accept.float()
    return x, MCMCInfo(accepted / n_proposals, energy)
