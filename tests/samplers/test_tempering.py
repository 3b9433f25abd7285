"""Parallel tempering samples a tiny RBM's exact distribution, and keeps its state in buffers."""

import pytest
import torch

from shortrun.estimators.exact import all_states
from shortrun.samplers.gibbs import BernoulliRBMParams
from shortrun.samplers.tempering import ParallelTempering, beta_ladder


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
    pt = ParallelTempering(n, 8, beta_ladder(12, 0.0))
    pt.reset(torch.zeros(n, 8))
    g = torch.Generator().manual_seed(0)
    v = pt.sweep(p, 60, generator=g)
    hist = torch.bincount(index(v), minlength=256).double() / n
    tv = 0.5 * float((hist - probs).abs().sum())
    bound = 0.5 * float(torch.sqrt(probs * (1 - probs) / n).sum())
    assert bound < 0.06 and tv < 1.5 * bound, (tv, bound)
    rates = pt.swap_rates()
    assert bool((rates > 0.05).all()), rates


def test_plain_gibbs_is_stuck_on_the_same_target():
    """The control that makes the test above mean something: without swaps the chains do not
    reach the other mode in the same number of sweeps."""
    from shortrun.samplers.gibbs import block_gibbs

    p = bimodal_rbm()
    g = torch.Generator().manual_seed(0)
    v = block_gibbs(p, torch.zeros(4000, 8, dtype=torch.float64), 60, generator=g).v
    assert float((v.sum(1) >= 4).double().mean()) < 0.05


def test_state_is_in_buffers_and_ladder_checks():
    pt = ParallelTempering(3, 5, beta_ladder(4, 0.2))
    keys = set(pt.state_dict())
    assert {"betas", "states", "parity", "accepted", "proposed"} <= keys
    assert torch.allclose(pt.betas, torch.tensor([1.0, 0.7333333, 0.4666667, 0.2]))
    with pytest.raises(ValueError, match="at least 2 temperatures"):
        beta_ladder(1)
    with pytest.raises(ValueError, match=r"beta_min must be in \[0, 1\)"):
        beta_ladder(3, 1.0)
    with pytest.raises(ValueError, match="starting at 1.0"):
        ParallelTempering(3, 5, torch.tensor([0.5, 0.1]))
