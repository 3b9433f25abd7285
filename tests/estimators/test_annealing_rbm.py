"""Generic AIS on an RBM's free energy against exact log Z and the RBM-specific AIS.

The RBM's hidden-layer free energy ``F(h) = −cᵀh − Σᵢ softplus(bᵢ + (Wh)ᵢ)`` has the same
normaliser as the RBM, ``Z = Σ_h exp(−F(h))``. A 784 × 20 RBM (and a fast 784 × 8 one;
random weights at the scale of a trained MNIST RBM's)
is annealed on the geometric path from a factorised Bernoulli base over
``h`` with single-bit-flip Metropolis sweeps (:func:`bit_flip_sweep`): every estimate within 3
of its standard errors of the exact value (estimators/exact.py) and of Salakhutdinov & Murray's
AIS (estimators/ais.py)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from shortrun.energies.rbm import BernoulliRBMParams
from shortrun.estimators.ais import ais_log_partition as rbm_ais
from shortrun.estimators.ais import base_rate_bias
from shortrun.estimators.annealing import AISSettings, ais_log_partition
from shortrun.estimators.binary import BernoulliBase, bit_flip_sweep
from shortrun.estimators.exact import log_partition


def mnist_sized_rbm(n_hidden: int):
    g = torch.Generator().manual_seed(0)
    w = 0.05 * torch.randn(784, n_hidden, generator=g, dtype=torch.float64)
    b = torch.randn(784, generator=g, dtype=torch.float64) - 1.0
    c = 0.5 * torch.randn(n_hidden, generator=g, dtype=torch.float64)
    return BernoulliRBMParams(w, b, c)


@pytest.mark.parametrize("n_hidden", [
    8, pytest.param(20, marks=pytest.mark.slow)])  # 20: exact log Z enumerates 2^20 states
def test_generic_ais_on_the_hidden_free_energy_matches_exact_and_rbm_ais(n_hidden):
    p = mnist_sized_rbm(n_hidden)

    def free_energy_h(h: torch.Tensor) -> torch.Tensor:
        return -(h @ p.c) - F.softplus(p.b + h @ p.W.t()).sum(1)

    # base: each hidden unit on with its probability under the data-free mean field h ~ σ(c)
    base = BernoulliBase(p.c.clone())
    g = torch.Generator().manual_seed(1)
    est = ais_log_partition(free_energy_h, base, 100,
                            AISSettings(n_betas=100, kernel=bit_flip_sweep), generator=g)
    exact = log_partition(p, torch.float64)
    assert abs(est.log_z - exact) < 3 * est.stderr + 1e-3, (est.log_z - exact, est.stderr)
    assert 0 < est.accept <= 1 and est.ess > 10
    data = (torch.rand(500, 784, generator=g, dtype=torch.float64)
            < torch.sigmoid(p.b)).double()
    sm = rbm_ais(p, base_rate_bias(data), n_runs=100, betas=500, generator=g)
    assert abs(est.log_z - sm.log_z) < 3 * math.hypot(est.stderr, sm.stderr) + 1e-3


def test_bernoulli_base_is_normalised():
    base = BernoulliBase(torch.tensor([0.3, -1.0, 2.0], dtype=torch.float64))
    states = torch.cartesian_prod(*[torch.tensor([0.0, 1.0], dtype=torch.float64)] * 3)
    assert abs(float(base.log_prob(states).exp().sum()) - 1.0) < 1e-12
