"""Step-size adaptation by dual averaging for the Metropolis–Hastings kernels with a step size
(:func:`mala_step`, :func:`hmc_step`).

Hoffman & Gelman (2014), "The No-U-Turn Sampler", §3.2.1 (Eq. 5-6 and Algorithm 5), after
Nesterov (2009): during warm-up the log step size follows
``log ε_{t+1} = μ − (√t / γ) H̄_t`` with ``H̄_t = (1 − 1/(t + t₀)) H̄_{t−1} + (δ − α_t)/(t + t₀)``,
where ``α_t`` is the acceptance at step ``t`` (here the fraction of the batch's chains that
accepted: the chains share one step size) and ``δ`` the target; the step size to keep is the
running average ``log ε̄_{t+1} = t^{−κ} log ε_{t+1} + (1 − t^{−κ}) log ε̄_t``. Defaults are the
paper's: ``μ = log(10 ε₀)``, ``γ = 0.05``, ``t₀ = 10``, ``κ = 0.75``. Adaptation changes the
kernel at every step, so its draws are warm-up only; sample afterwards at the returned step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from shortrun.samplers.langevin import EnergyFn

MALA_TARGET = 0.574  # optimal MALA acceptance in high dimension (Roberts & Rosenthal 1998)
HMC_TARGET = 0.65  # Beskos et al. (2013), the target Hoffman & Gelman use for HMC


class Adaptation(NamedTuple):
    """The step size to sample with, and per warm-up step the step size used and the fraction
    of chains that accepted."""

    step_size: float
    step_sizes: list[float]
    accept: list[float]


def dual_averaging(kernel: Callable[..., tuple[Any, Any]], energy_fn: EnergyFn, state: Any,
                   n_warmup: int, step_size: float, target: float = MALA_TARGET, *,
                   gamma: float = 0.05, t0: float = 10.0, kappa: float = 0.75,
                   generator: torch.Generator | None = None,
                   **params: Any) -> tuple[Any, Adaptation]:
    """``n_warmup`` steps of ``kernel`` (``mala_step`` or ``hmc_step``, extra ``params`` such as
    ``n_leapfrog`` passed on) from ``state`` while tuning its step size towards acceptance
    ``target``; returns the last state and the :class:`Adaptation`."""
    if n_warmup < 1:
        raise ValueError(f"n_warmup must be >= 1; got {n_warmup}")
    if step_size <= 0:
        raise ValueError(f"step_size must be > 0; got {step_size}")
    if not 0.0 < target < 1.0:
        raise ValueError(f"target acceptance must be in (0, 1); got {target}")
    mu = math.log(10.0 * step_size)
    log_eps, log_eps_bar, h_bar = math.log(step_size), 0.0, 0.0
    used, rates = [], []
    for t in range(1, n_warmup + 1):
        eps = math.exp(log_eps)
        state, info = kernel(energy_fn, state, step_size=eps, generator=generator, **params)
        rate = float(info.is_accepted.float().mean())
        used.append(eps)
        rates.append(rate)
        w = 1.0 / (t + t0)
        h_bar = (1.0 - w) * h_bar + w * (target - rate)
        log_eps = mu - math.sqrt(t) / gamma * h_bar
        eta = t ** -kappa
        log_eps_bar = eta * log_eps + (1.0 - eta) * log_eps_bar
    return state, Adaptation(math.exp(log_eps_bar), used, rates)
