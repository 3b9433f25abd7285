"""Parallel tempering's swap move on an asymmetric target with unequal mode masses: the
swap acceptance ``min(1, exp(F_βt(x_t) + F_βt+1(x_t+1) − F_βt(x_t+1) − F_βt+1(x_t)))``
(Swendsen & Wang 1986) is checked through the β = 1 marginal against exact enumeration. On
a symmetric equal-mass target a wrong acceptance can still split the mass evenly; here the
heavy mode holds about 0.91 of it."""

import math

import torch

from shortrun.energies.rbm import BernoulliRBMParams
from shortrun.estimators.exact import all_states
from shortrun.samplers.sources import TemperedChains
from shortrun.samplers.tempering import beta_ladder, tempering_step


def lopsided_rbm() -> BernoulliRBMParams:
    """All-on vs all-off over 8 visible units through one hidden unit, with unequal weights
    and biases per unit (no mirror symmetry) and the all-on side heavier."""
    W = torch.tensor([[6.0], [6.5], [5.5], [7.0], [6.0], [5.0], [6.5], [6.0]],
                     dtype=torch.float64)
    b = torch.tensor([-3.0, -3.2, -2.8, -3.5, -3.0, -2.5, -3.2, -3.0], dtype=torch.float64)
    return BernoulliRBMParams(W, b, torch.tensor([-22.0], dtype=torch.float64))


def index(v: torch.Tensor) -> torch.Tensor:
    return (v.long() * (1 << torch.arange(v.shape[1]))).sum(1)


def test_swaps_reach_the_exact_unequal_mode_masses_from_the_light_mode():
    """4,000 ladders (12 temperatures) started in the light all-off mode, 60 sweeps, seed 0.
    Heavy-mode mass: exact vs observed within 4 standard errors √(p(1−p)/n) ≈ 0.018; the
    histogram's TV within 1.5× its expected value bound 0.5·Σ√(p(1−p)/n) (≈ 0.037)."""
    p = lopsided_rbm()
    states = all_states(8, torch.float64)
    probs = torch.softmax(-p.free_energy(states), 0)
    heavy = states.sum(1) >= 4
    mass = float(probs[heavy].sum())
    assert 0.85 < mass < 0.95
    n = 4000
    chains = TemperedChains(n, 8, beta_ladder(12, 0.0))
    chains.reset(torch.zeros(n, 8))
    state, gen = chains.start(), torch.Generator().manual_seed(0)
    for _ in range(60):
        state, _ = tempering_step(p, state, betas=chains.betas, generator=gen)
    v = state.replicas[0]
    observed = float((v.sum(1) >= 4).double().mean())
    assert abs(observed - mass) < 4 * math.sqrt(mass * (1 - mass) / n), (observed, mass)
    hist = torch.bincount(index(v), minlength=256).double() / n
    tv = 0.5 * float((hist - probs).abs().sum())
    bound = 0.5 * float(torch.sqrt(probs * (1 - probs) / n).sum())
    assert tv < 1.5 * bound, (tv, bound)
