"""MALA, HMC and independence-MH jumps sample known targets within standard-error tolerances.

Chains are independent, so the final states of N chains are N independent draws once the
chains have mixed; a mean then has standard error sd/√N and a variance 4-th-moment-based
error. Every check allows 4.5 standard errors (two-sided p ≈ 7e-6 per check with fixed seeds).
"""

from __future__ import annotations

import math

import pytest
import torch

from shortrun.samplers.hmc import hmc
from shortrun.samplers.independence import independence_mh, noise_log_density
from shortrun.samplers.langevin import langevin
from shortrun.samplers.mala import mala
from shortrun.samplers.sources import NoiseSource

Z = 4.5
MEAN = torch.tensor([1.0, -2.0])
COV = torch.tensor([[1.0, 0.6], [0.6, 0.5]])
PREC = torch.linalg.inv(COV)


def gaussian_energy(x: torch.Tensor) -> torch.Tensor:
    d = x - MEAN
    return 0.5 * ((d @ PREC) * d).sum(1)


def check_gaussian_moments(x: torch.Tensor) -> None:
    n = len(x)
    sd = COV.diagonal().sqrt()
    assert ((x.mean(0) - MEAN).abs() < Z * sd / math.sqrt(n)).all(), x.mean(0)
    var = x.var(0)
    # Var of the sample variance of a Gaussian is 2σ⁴/(n−1).
    assert ((var - COV.diagonal()).abs() < Z * COV.diagonal() * math.sqrt(2 / (n - 1))).all(), var
    cov01 = float(((x[:, 0] - x[:, 0].mean()) * (x[:, 1] - x[:, 1].mean())).mean())
    # Var of the sample covariance: (σ₀₀σ₁₁ + σ₀₁²)/n.
    se = math.sqrt((COV[0, 0] * COV[1, 1] + COV[0, 1] ** 2) / n)
    assert abs(cov01 - float(COV[0, 1])) < Z * se, cov01


def test_mala_samples_a_correlated_gaussian():
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(4000, 2, generator=g) * 2
    x, info = mala(gaussian_energy, x0, 150, 0.5, generator=g)
    check_gaussian_moments(x)
    assert 0.3 < info.mean_acceptance < 1.0


def test_mala_corrects_the_bias_ula_has_at_a_large_step():
    """Standard normal, s = 1: ULA's stationary variance is 1/(1 − s²/4) = 4/3, MALA's is 1."""
    g = torch.Generator().manual_seed(1)

    def energy(x):
        return 0.5 * (x**2).sum(1)

    x0 = torch.randn(6000, 1, generator=g)
    x_ula, _ = langevin(energy, x0, 100, 1.0, generator=g)
    x_mala, info = mala(energy, x0, 100, 1.0, generator=g)
    se = math.sqrt(2 / 6000) * (4 / 3)
    assert abs(float(x_ula.var()) - 4 / 3) < Z * se
    assert abs(float(x_mala.var()) - 1.0) < Z * math.sqrt(2 / 6000)
    assert info.acceptance_rate.shape == (6000,)
    assert 0.5 < info.mean_acceptance < 0.95


def test_hmc_samples_a_correlated_gaussian():
    g = torch.Generator().manual_seed(2)
    x0 = torch.randn(4000, 2, generator=g) * 2
    x, info = hmc(gaussian_energy, x0, 30, 0.25, n_leapfrog=5, generator=g)
    check_gaussian_moments(x)
    assert 0.6 < info.mean_acceptance <= 1.0


# A 2-D mixture 0.3·N((−1, 0), 0.6²I) + 0.7·N((1, 0), 0.6²I): overlapping enough to mix.
W, MU, S = torch.tensor([0.3, 0.7]), torch.tensor([[-1.0, 0.0], [1.0, 0.0]]), 0.6


def mixture_energy(x: torch.Tensor) -> torch.Tensor:
    d2 = ((x[:, None] - MU[None]) ** 2).sum(-1)
    return -torch.logsumexp(W.log() - d2 / (2 * S**2), dim=1)


def check_mixture(x: torch.Tensor) -> None:
    n = len(x)
    mean0 = float((W * MU[:, 0]).sum())  # 0.4
    var0 = S**2 + float((W * MU[:, 0] ** 2).sum()) - mean0**2  # 0.36 + 1 − 0.16
    assert abs(float(x[:, 0].mean()) - mean0) < Z * math.sqrt(var0 / n)
    assert abs(float(x[:, 1].mean())) < Z * S / math.sqrt(n)
    # P(x₀ > 0) in closed form, binomial standard error.
    phi = 0.5 * (1 + torch.erf(torch.tensor(1 / (S * math.sqrt(2)))))
    p_right = float(W[1] * phi + W[0] * (1 - phi))
    frac = float((x[:, 0] > 0).float().mean())
    assert abs(frac - p_right) < Z * math.sqrt(p_right * (1 - p_right) / n), (frac, p_right)


@pytest.mark.parametrize("kernel", ["mala", "hmc"])
def test_kernels_sample_a_two_mode_mixture_with_unequal_weights(kernel):
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(4000, 2, generator=g)
    if kernel == "mala":
        x, _ = mala(mixture_energy, x0, 300, 0.6, generator=g)
    else:
        x, _ = hmc(mixture_energy, x0, 40, 0.3, n_leapfrog=6, generator=g)
    check_mixture(x)


def test_independence_jumps_fix_mode_weights_langevin_cannot():
    """Two far modes (±3, std 0.3), weights 0.2/0.8, every chain starts in the light mode.
    Langevin never crosses; uniform independence-MH proposals restore the 0.8 weight."""
    w = torch.tensor([0.2, 0.8])
    centres = torch.tensor([[-3.0, 0.0], [3.0, 0.0]])

    def energy(x):
        d2 = ((x[:, None] - centres[None]) ** 2).sum(-1)
        return -torch.logsumexp(w.log() - d2 / (2 * 0.09), dim=1)

    g = torch.Generator().manual_seed(4)
    x = centres[0] + 0.3 * torch.randn(3000, 2, generator=g)
    x_lang, _ = langevin(energy, x, 200, 0.1, generator=g)
    assert float((x_lang[:, 0] > 0).float().mean()) < 0.01
    noise = NoiseSource((2,), "uniform", -4.5, 4.5)
    for _ in range(20):
        x, info = independence_mh(energy, x, lambda n: noise.start(n, generator=g),
                                  noise_log_density(noise), 10, generator=g)
        x, _ = langevin(energy, x, 10, 0.1, generator=g)
    frac = float((x[:, 0] > 0).float().mean())
    assert abs(frac - 0.8) < Z * math.sqrt(0.8 * 0.2 / 3000), frac
    assert 0 < info.mean_acceptance < 0.2


def test_gaussian_noise_log_density_ratio():
    noise = NoiseSource((2,), "normal", std=2.0)
    log_q = noise_log_density(noise)
    x = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    assert torch.allclose(log_q(x) - log_q(torch.zeros(2, 2)), torch.tensor([-5 / 8, 0.0]))


@pytest.mark.parametrize("call, message", [
    (lambda: mala(gaussian_energy, torch.zeros(2, 2), 0, 0.1), "n_steps must be >= 1"),
    (lambda: mala(gaussian_energy, torch.zeros(2, 2), 5, 0.0), "step_size must be > 0"),
    (lambda: hmc(gaussian_energy, torch.zeros(2, 2), 5, -1.0), "step_size must be > 0"),
    (lambda: hmc(gaussian_energy, torch.zeros(2, 2), 5, 0.1, 0), "n_leapfrog must be >= 1"),
    (lambda: independence_mh(gaussian_energy, torch.zeros(2, 2), torch.zeros, lambda x: x, 0),
     "n_proposals must be >= 1"),
])
def test_bad_arguments_are_refused_with_a_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()
