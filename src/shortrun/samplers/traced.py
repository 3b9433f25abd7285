"""Long chains that record the energy of every chain at every step, for the chain diagnostics
(:mod:`shortrun.metrics.chains`: ESS, split-R̂, acceptance).

A thin layer over the library's drivers and kernels: :func:`langevin_trace` is :func:`langevin`
with a callback, :func:`mh_trace` repeats any Metropolis–Hastings kernel (:func:`mala_step`,
:func:`hmc_step`, :func:`independence_step`) and keeps its accept decisions, :func:`gibbs_trace`
repeats :func:`gibbs_step` and records the free energy of the visible state. Every trace is
``(chains, draws)`` in float64 on the CPU.

Neither Langevin nor Gibbs has an accept step (Gibbs draws from exact conditionals and always
moves; the unadjusted Langevin chain never rejects). :func:`metropolised` gives the MALA chain
whose proposal *is* a given (possibly tempered) Langevin step, so its acceptance rate says how far
that step is from leaving its target invariant. Step sizes are fixed during a traced chain;
:mod:`shortrun.samplers.adapt` tunes a MALA or HMC step size beforehand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from shortrun.energies.rbm import RBMParams
from shortrun.samplers.gibbs import gibbs_init, gibbs_step
from shortrun.samplers.langevin import EnergyFn, LangevinInfo, langevin
from shortrun.samplers.mala import mala_init, mala_step


class Trace(NamedTuple):
    """``energy``: ``(chains, draws)`` float64, the energy of each chain's state, one draw per
    step; ``accepted``: ``(chains, steps)`` bool of an MH kernel, ``None`` for a kernel that
    always moves."""

    energy: torch.Tensor
    accepted: torch.Tensor | None = None


def _check_steps(n_steps: int) -> None:
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1; got {n_steps}")


def langevin_trace(energy_fn: EnergyFn, x0: torch.Tensor, n_steps: int, step_size: float,
                   noise_scale: float = 1.0, *, drift_clamp: float | None = None,
                   domain: tuple[float, float] | None = None,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, Trace]:
    """:func:`langevin` for ``n_steps``; draw ``k`` is ``E(x_k)``, the energy at the start of
    step ``k`` (the kernel computes it anyway, so the trace costs nothing)."""
    _check_steps(n_steps)
    rows: list[torch.Tensor] = []

    def record(k: int, x: torch.Tensor, info: LangevinInfo) -> None:
        rows.append(info.energy.detach().double().cpu())

    x, _ = langevin(energy_fn, x0, n_steps, step_size, noise_scale, drift_clamp=drift_clamp,
                    domain=domain, generator=generator, callback=record)
    return x, Trace(torch.stack(rows, 1))


def mh_trace(kernel: Callable[..., tuple[Any, Any]], energy_fn: EnergyFn, state: Any,
             n_steps: int, *, generator: torch.Generator | None = None,
             **params: Any) -> tuple[Any, Trace]:
    """``n_steps`` of a Metropolis–Hastings kernel (state with ``.energy``, info with
    ``.is_accepted``) from ``state``; draw ``k`` is the energy after step ``k``."""
    _check_steps(n_steps)
    energies, accepts = [], []
    for _ in range(n_steps):
        state, info = kernel(energy_fn, state, generator=generator, **params)
        energies.append(state.energy.detach().double().cpu())
        accepts.append(info.is_accepted.detach().cpu())
    return state, Trace(torch.stack(energies, 1), torch.stack(accepts, 1))


@torch.no_grad()
def gibbs_trace(params: RBMParams, v0: torch.Tensor, n_steps: int, *,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, Trace]:
    """``n_steps`` block-Gibbs sweeps from ``v0``; draw ``k`` is the free energy ``F(v)`` of
    the visible state after sweep ``k``."""
    _check_steps(n_steps)
    state, rows = gibbs_init(params, v0), []
    for _ in range(n_steps):
        state, _ = gibbs_step(params, state, generator=generator)
        rows.append(params.free_energy(state.v).double().cpu())
    return state.v, Trace(torch.stack(rows, 1))


def metropolised(energy_fn: EnergyFn, step_size: float, noise_scale: float = 1.0,
                 ) -> tuple[EnergyFn, float]:
    """The energy and step size of the MALA chain whose proposal is the Langevin step
    ``x − ½s²∇E + sτξ``: with ``s′ = sτ`` that step is ``x − ½s′²∇(E/τ²) + s′ξ``, the MALA
    proposal of ``E/τ²`` (the tempered chain targets ``exp(−E/τ²)``)."""
    if noise_scale <= 0:
        raise ValueError("a Langevin step without noise (noise_scale 0) is gradient descent; "
                         "it has no Metropolis-adjusted version")
    if noise_scale == 1.0:
        return energy_fn, step_size
    temperature = noise_scale ** 2
    return (lambda x: energy_fn(x) / temperature), step_size * noise_scale


def mala_accept_trace(energy_fn: EnergyFn, x0: torch.Tensor, n_steps: int, step_size: float,
                      noise_scale: float = 1.0, *,
                      generator: torch.Generator | None = None) -> Trace:
    """MALA from ``x0`` with the proposal of the Langevin step (:func:`metropolised`); its
    ``accepted`` record is the acceptance of that step."""
    energy, s = metropolised(energy_fn, step_size, noise_scale)
    _, trace = mh_trace(mala_step, energy, mala_init(energy, x0), n_steps, generator=generator,
                        step_size=s)
    return trace
