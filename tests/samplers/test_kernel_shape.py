"""Every kernel has one shape, ``kernel(energy, state, *, params, generator) -> (state,
info)``; MALA's proposal is the Langevin step; one Metropolis–Hastings accept for all."""

from __future__ import annotations

import importlib

import pytest
import torch

from shortrun.samplers.hmc import HMCInfo, HMCState, hmc, hmc_init, hmc_step
from shortrun.samplers.independence import (
    IndependenceInfo,
    IndependenceState,
    independence_init,
    independence_mh,
    independence_step,
)
from shortrun.samplers.langevin import LangevinInfo, langevin_step
from shortrun.samplers.mala import MALAInfo, MALAState, mala, mala_init, mala_step
from shortrun.samplers.metropolis import mh_accept, mh_select

# the package re-exports the function ``mala``, which hides the submodule's name
mala_module = importlib.import_module("shortrun.samplers.mala")


def energy(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (x**2).sum(1) + torch.sin(3 * x[:, 0])


def x0() -> torch.Tensor:
    return torch.randn(256, 2, generator=torch.Generator().manual_seed(0))


def is_namedtuple(obj) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def test_langevin_step_is_a_kernel_whose_state_is_the_position():
    x = x0()
    new, info = langevin_step(energy, x, step_size=0.1, generator=torch.Generator())
    assert isinstance(new, torch.Tensor) and new.shape == x.shape
    assert isinstance(info, LangevinInfo) and info.energy.shape == (256,)


def test_mala_hmc_independence_steps_return_state_and_info():
    x, g = x0(), torch.Generator().manual_seed(1)
    state, info = mala_step(energy, mala_init(energy, x), step_size=0.3, generator=g)
    assert isinstance(state, MALAState) and isinstance(info, MALAInfo)
    assert info.is_accepted.dtype == torch.bool and info.is_accepted.shape == (256,)
    state, info = hmc_step(energy, hmc_init(energy, x), step_size=0.2, n_leapfrog=3, generator=g)
    assert isinstance(state, HMCState) and isinstance(info, HMCInfo)
    assert info.is_accepted.shape == (256,)

    def propose(n):
        return 3 * torch.rand(n, 2, generator=g) - 1.5

    def log_q(z):
        return torch.zeros(len(z))

    state, info = independence_step(energy, independence_init(energy, x, log_q),
                                    propose=propose, log_q=log_q, generator=g)
    assert isinstance(state, IndependenceState) and isinstance(info, IndependenceInfo)
    for s in (state,):
        assert is_namedtuple(s) and torch.allclose(s.energy, energy(s.x))


def test_mala_proposal_is_the_langevin_step_for_the_same_noise(monkeypatch):
    """MALA calls ``langevin_step`` for its proposal (no re-derived move): with the same
    generator state the proposal equals a plain Langevin step, accepted rows move there and
    rejected rows stay."""
    calls = []
    monkeypatch.setattr(mala_module, "langevin_step",
                        lambda *a, **k: calls.append(1) or langevin_step(*a, **k))
    x, s = x0(), 0.9
    state, info = mala_step(energy, mala_init(energy, x), step_size=s,
                            generator=torch.Generator().manual_seed(5))
    assert calls == [1]
    y, _ = langevin_step(energy, x, s, 1.0, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(info.proposal, y, rtol=0, atol=0)
    acc = info.is_accepted
    assert 0 < int(acc.sum()) < len(acc)   # a large step: some accepted, some rejected
    assert torch.equal(state.x[acc], y[acc]) and torch.equal(state.x[~acc], x[~acc])
    # the state carries E and ∇E at its position, so the next proposal needs no evaluation
    torch.testing.assert_close(state.energy, energy(state.x))


def test_the_drivers_are_their_kernels_repeated():
    x = x0()
    a, _ = mala(energy, x, 3, 0.3, generator=torch.Generator().manual_seed(2))
    state, g = mala_init(energy, x), torch.Generator().manual_seed(2)
    for _ in range(3):
        state, _ = mala_step(energy, state, step_size=0.3, generator=g)
    assert torch.equal(a, state.x)
    b, _ = hmc(energy, x, 2, 0.2, 3, generator=torch.Generator().manual_seed(3))
    state, g = hmc_init(energy, x), torch.Generator().manual_seed(3)
    for _ in range(2):
        state, _ = hmc_step(energy, state, step_size=0.2, n_leapfrog=3, generator=g)
    assert torch.equal(b, state.x)


def test_mh_accept_rejects_nan_and_keeps_infinities():
    log_alpha = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0] * 1000)
    accept = mh_accept(log_alpha, torch.Generator().manual_seed(0)).reshape(1000, 4)
    assert not bool(accept[:, 0].any())    # NaN: reject
    assert bool(accept[:, 1].all())        # +inf: accept
    assert not bool(accept[:, 2].any())    # −inf: reject, even at u = 0
    assert bool(accept[:, 3].all())        # α = 1: accept


def test_a_nan_proposal_energy_is_rejected_by_every_mh_kernel():
    """An energy that overflows at some proposals: those chains stay where they were."""
    def overflowing(x):
        e = 0.5 * (x**2).sum(1)
        return torch.where(x[:, 0] > 0.5, torch.nan, e)

    x = torch.full((64, 2), -1.0)
    g = torch.Generator().manual_seed(4)
    out, _ = independence_mh(overflowing, x, lambda n: torch.ones(n, 2),
                             lambda z: torch.zeros(len(z)), 5, generator=g)
    assert torch.equal(out, x)
    state, info = mh_select(torch.full((64,), torch.nan),
                            MALAState(x + 1, x[:, 0], x), MALAState(x, x[:, 0], x), g)
    assert torch.equal(state.x, x) and not bool(info.any())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mh_accept_draws_one_uniform_per_chain(dtype):
    """The accept consumes exactly one U(0,1) per entry, in float64 for float64 log α."""
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    log_alpha = torch.full((10,), -0.5, dtype=dtype)
    accept = mh_accept(log_alpha, g1)
    u = torch.rand(10, generator=g2, dtype=dtype)
    assert torch.equal(accept, torch.log(u) < -0.5)


def test_driver_functions_and_their_modules_are_both_reachable():
    """``from shortrun.samplers import langevin`` is the driver (README); the module it hides
    is ``shortrun.samplers.langevin_kernel`` (and so for mala and hmc)."""
    import types

    import shortrun.samplers as samplers

    for name in ("langevin", "mala", "hmc"):
        module = getattr(samplers, f"{name}_kernel")
        assert isinstance(module, types.ModuleType)
        assert module is importlib.import_module(f"shortrun.samplers.{name}")
        assert getattr(samplers, name) is getattr(module, name) and callable(module.__dict__[name])
