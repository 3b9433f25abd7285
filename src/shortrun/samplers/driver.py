"""The one driver loop around the kernels: ``n_steps`` transitions of one kernel.

Every multi-step sampler (:func:`~shortrun.samplers.langevin.langevin`,
:func:`~shortrun.samplers.mala.mala`, :func:`~shortrun.samplers.hmc.hmc`,
:func:`~shortrun.samplers.independence.independence_mh`,
:func:`~shortrun.samplers.gibbs.block_gibbs`) is this loop with its kernel's parameters bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

from shortrun.samplers.metropolis import MCMCInfo

S = TypeVar("S")


def iterate(step: Callable[[S], tuple[S, Any]], state: S, n_steps: int,
            on_step: Callable[[int, S, Any], None] | None = None) -> tuple[S, Any]:
    """``state ← step(state)`` ``n_steps`` times; ``on_step(k, state, info)`` after each.
    Returns the last state and the last info (None when ``n_steps`` is 0)."""
    info = None
    for k in range(n_steps):
        state, info = step(state)
        if on_step is not None:
            on_step(k, state, info)
    return state, info


def iterate_mh(step: Callable[[Any], tuple[Any, Any]], state: Any,
               n_steps: int) -> tuple[torch.Tensor, MCMCInfo]:
    """:func:`iterate` for a Metropolis–Hastings kernel whose state has ``x`` and ``energy``
    and whose info has ``is_accepted``: returns the final ``x`` and each chain's acceptance
    rate over the ``n_steps`` moves with its final energy."""
    accepted = torch.zeros(state.x.shape[0], device=state.x.device)

    def count(k: int, s: Any, info: Any) -> None:
        accepted.add_(info.is_accepted.float())

    state, _ = iterate(step, state, n_steps, count)
    return state.x, MCMCInfo(accepted / n_steps, state.energy)
