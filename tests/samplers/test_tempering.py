"""Parallel tempering samples a tiny RBM's exact distribution, keeps its replicas in a chain
source's buffers, and swaps through the shared Metropolis–Hastings accept."""

import importlib

import pytest
import torch

from shortrun.energies.rbm import BernoulliRBMParams
from shortrun.estimators.exact import all_states
from shortrun.samplers.gibbs import block_gibbs
from shortrun.samplers.sources import TemperedChains
from shortrun.samplers.tempering import (
    SwapInfo,
    TemperingState,
    beta_ladder,
    swap_step,
    tempering_step,
)

tempering = importlib.import_module("shortrun.samplers.tempering")


def bimodal_rbm():
    """Two far-apart modes (all-on / all-off over 8 units) of equal mass separated by a high
    barrier, so a plain Gibbs chain started in one mode stays there while PT crosses."""
    nv = 8
    W = torch.full((nv, 1), 6.0, dtype=torch.float64)
    b = torch.full((nv,), -3.0, dtype=torch.float64)
    c = torch.tensor([-24.0], dtype=torch.float64)
    return BernoulliRBMParams(W, b, c)


def exact_probs(p):
    V = all_states(p.n_visible, torch.float64)
    return torch.softmax(-p.free_energy(V), 0)


def index(v):
    return (v.long() * (1 << torch.arange(v.shape[1]))).sum(1)


def test_parallel_tempering_samples_the_exact_distribution():
    """4,000 independent PT ladders (12 temperatures), all started at the all-off mode, 60
    sweeps. Tolerance: the expected TV of an n-sample histogram is ≤ 0.5·Σ√(p(1−p)/n), which is
    computed below (≈ 0.043 here: many light states); 1.5× that is the tolerance, while missing
    the all-on mode (mass ≈ 0.5) would give TV ≈ 0.5."""
    p = bimodal_rbm()
    probs = exact_probs(p)
    on = all_states(8).sum(1) >= 4
    assert 0.3 < float(probs[on].sum()) < 0.7  # both modes carry mass
    n = 4000
    chains = TemperedChains(n, 8, beta_ladder(12, 0.0))
    chains.reset(torch.zeros(n, 8))
    g = torch.Generator().manual_seed(0)
    state = chains.start()
    for _ in range(60):
        state, info = tempering_step(p, state, betas=chains.betas, generator=g)
        chains.record(info)
    chains.finish(state)
    v = chains.states[0]
    hist = torch.bincount(index(v), minlength=256).double() / n
    tv = 0.5 * float((hist - probs).abs().sum())
    bound = 0.5 * float(torch.sqrt(probs * (1 - probs) / n).sum())
    assert bound < 0.06 and tv < 1.5 * bound, (tv, bound)
    rates = chains.swap_rates()
    assert bool((rates > 0.05).all()), rates


def test_plain_gibbs_is_stuck_on_the_same_target():
    """The control that makes the test above mean something: without swaps the chains do not
    reach the other mode in the same number of sweeps."""
    p = bimodal_rbm()
    g = torch.Generator().manual_seed(0)
    v = block_gibbs(p, torch.zeros(4000, 8, dtype=torch.float64), 60, generator=g).v
    assert float((v.sum(1) >= 4).double().mean()) < 0.05


def test_swap_step_has_the_kernel_shape_and_alternates_pairs():
    p = bimodal_rbm()
    betas = beta_ladder(4, 0.0)
    x = torch.rand(4, 3, 8, generator=torch.Generator().manual_seed(1)).round().double()
    state, info = swap_step(p, TemperingState(x, 0), betas=betas,
                            generator=torch.Generator().manual_seed(2))
    assert isinstance(state, TemperingState) and isinstance(info, SwapInfo)
    assert info.pairs.tolist() == [0, 2] and info.is_accepted.shape == (2, 3)
    assert state.parity == 1
    state, info = swap_step(p, state, betas=betas, generator=torch.Generator().manual_seed(2))
    assert info.pairs.tolist() == [1] and state.parity == 0
    # a swap only permutes replicas within each chain's ladder
    assert torch.equal(state.replicas.sum(0), x.sum(0))


def test_swap_uses_the_shared_accept_and_rejects_a_nan_energy(monkeypatch):
    """A free energy that overflowed (NaN) must never be swapped in; the decision is the one
    Metropolis–Hastings accept of the library (samplers/metropolis.py)."""
    calls = []
    real = tempering.mh_accept

    def spy(log_alpha, generator=None):
        calls.append(log_alpha)
        return real(log_alpha, generator)

    monkeypatch.setattr(tempering, "mh_accept", spy)

    class NaNEnergy:
        """Free energy NaN on the state with the first unit on, else 0 (every swap would
        be accepted: log α = 0)."""

        def free_energy(self, v, beta=1.0):
            return torch.where(v[:, 0] > 0, torch.nan, 0.0).to(v)

    x = torch.zeros(2, 64, 3, dtype=torch.float64)
    x[1, :, 0] = 1.0   # the β_1 replica sits where the energy is NaN
    state, info = swap_step(NaNEnergy(), TemperingState(x, 0), betas=beta_ladder(2),
                            generator=torch.Generator().manual_seed(0))
    assert len(calls) == 1 and bool(calls[0].isnan().all())
    assert not bool(info.is_accepted.any())
    assert torch.equal(state.replicas, x)
    # control: with a finite energy the same swaps are all accepted
    x[1, :, 0] = 0.0
    _, info = swap_step(NaNEnergy(), TemperingState(x, 0), betas=beta_ladder(2))
    assert bool(info.is_accepted.all())


def test_state_is_in_buffers_and_ladder_checks():
    pt = TemperedChains(3, 5, beta_ladder(4, 0.2))
    keys = set(pt.state_dict())
    assert {"betas", "states", "parity", "accepted", "proposed"} <= keys
    assert torch.allclose(pt.betas, torch.tensor([1.0, 0.7333333, 0.4666667, 0.2]))
    with pytest.raises(ValueError, match="at least 2 temperatures"):
        beta_ladder(1)
    with pytest.raises(ValueError, match=r"beta_min must be in \[0, 1\)"):
        beta_ladder(3, 1.0)
    with pytest.raises(ValueError, match="starting at 1.0"):
        TemperedChains(3, 5, torch.tensor([0.5, 0.1]))
    with pytest.raises(ValueError, match="all 3 tempered chains advance every update"):
        pt.start(2)
