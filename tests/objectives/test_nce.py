"""Noise-contrastive estimation: closed-form answers on a Gaussian energy, and the noises."""

from __future__ import annotations

import math

import pytest
import torch
from sandwich import minimise, sandwich_se

from shortrun.objectives.nce import CustomNoise, GaussianNoise, UniformNoise, nce_loss

MEAN = torch.tensor([0.5, -1.0], dtype=torch.float64)
COV = torch.tensor([[1.0, 0.6], [0.6, 2.0]], dtype=torch.float64)


def gaussian_energy(theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``½ (x − μ)ᵀ L Lᵀ (x − μ)`` with ``θ = (μ₁, μ₂, log L₁₁, L₂₁, log L₂₂, c)``."""
    mu = theta[:2]
    zero = torch.zeros((), dtype=theta.dtype)
    chol = torch.stack([torch.stack([theta[2].exp(), zero]),
                        torch.stack([theta[3], theta[4].exp()])])
    r = (x.double() - mu) @ chol  # rows (x − μ)ᵀ L
    return 0.5 * r.pow(2).sum(1)


def true_theta() -> torch.Tensor:
    chol = torch.linalg.cholesky(torch.linalg.inv(COV))
    log_z = 0.5 * math.log(float(torch.linalg.det(2 * math.pi * COV)))
    return torch.tensor([*MEAN.tolist(), math.log(chol[0, 0]), float(chol[1, 0]),
                         math.log(chol[1, 1]), log_z], dtype=torch.float64)


def test_nce_on_a_gaussian_energy_recovers_mean_covariance_and_log_z() -> None:
    """2000 data from N(m, Σ), ν = 2 against the noise N(0, 4I): the NCE fit of the Gaussian
    energy family lands within 4 sandwich standard errors of the true (m, chol Σ⁻¹, log Z)."""
    g = torch.Generator().manual_seed(0)
    n, nu, groups = 2000, 2, 20
    x = MEAN + torch.randn(n, 2, generator=g, dtype=torch.float64) @ torch.linalg.cholesky(COV).T
    noise = GaussianNoise(torch.zeros(2), 4 * torch.eye(2))
    y = noise.sample(nu * n, g).double()

    def group_losses(theta: torch.Tensor) -> torch.Tensor:
        return torch.stack([
            nce_loss(lambda u: gaussian_energy(theta, u), x[k::groups], noise, theta[5],
                     noise_ratio=nu, noise_samples=y[k::groups]).loss
            for k in range(groups)])

    def total(theta: torch.Tensor) -> torch.Tensor:
        return nce_loss(lambda u: gaussian_energy(theta, u), x, noise, theta[5],
                        noise_ratio=nu, noise_samples=y).loss

    fit = minimise(total, torch.zeros(6, dtype=torch.float64))
    se = sandwich_se(group_losses, fit, total)
    assert float(se[5]) < 0.08  # a test that could fail: log Z is pinned to a few hundredths
    err = (fit - true_theta()).abs()
    assert bool((err < 4 * se).all()), f"|θ̂ − θ*| = {err.tolist()}, 4 SE = {(4 * se).tolist()}"


def test_metrics_of_a_constant_energy_are_closed_form() -> None:
    """E ≡ 0 and c = log|box| against the uniform box: the model *is* the noise, so every
    logit is −log ν, the loss is −log σ(−log ν) − ν log σ(log ν) and no point is classified
    as data (accuracy ½: all noise right, all data wrong)."""
    noise = UniformNoise(-1.0, 1.0, (2,))
    x = noise.sample(100, torch.Generator().manual_seed(1))
    c = torch.tensor(math.log(4.0))
    out = nce_loss(lambda u: torch.zeros(u.shape[0]), x, noise, c, noise_ratio=3.0)
    nu = 3.0
    want = -math.log(1 / (1 + nu)) - nu * math.log(nu / (1 + nu))
    assert out.loss.item() == pytest.approx(want, rel=1e-5)
    assert out.metrics["accuracy"] == pytest.approx(0.5)
    assert out.metrics["log_z"] == pytest.approx(math.log(4.0))
    assert out.metrics["energy_pos"] == 0.0 and out.metrics["energy_noise"] == 0.0
    assert out.x_neg.shape == (300, 2)


def test_noise_log_densities_are_normalised() -> None:
    g = torch.Generator().manual_seed(2)
    gauss = GaussianNoise.fit(torch.randn(500, 2, generator=g) * 2 + 1, scale=1.5)
    grid = torch.linspace(-12, 14, 521)
    xy = torch.cartesian_prod(grid, grid)
    cell = float(grid[1] - grid[0]) ** 2
    assert float(gauss.log_prob(xy).exp().sum()) * cell == pytest.approx(1.0, abs=1e-3)
    box = UniformNoise(torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 3.0]), (2,))
    assert torch.allclose(box.log_prob(box.sample(10, g)), torch.full((10,), -math.log(6.0)))
    assert box.log_prob(torch.tensor([[5.0, 1.0]])).item() == -math.inf
    custom = CustomNoise(lambda n, gen: torch.zeros(n, 2), lambda u: torch.zeros(u.shape[0]))
    assert custom.sample(3).shape == (3, 2) and custom.log_prob(torch.ones(3, 2)).shape == (3,)


def test_bad_inputs_name_the_problem() -> None:
    x = torch.zeros(4, 2)
    box = UniformNoise(-1.0, 1.0, (2,))
    zero = torch.zeros(())
    with pytest.raises(ValueError, match="noise_ratio"):
        nce_loss(lambda u: u.sum(1), x, box, zero, noise_ratio=0.0)
    with pytest.raises(ValueError, match="one learned scalar"):
        nce_loss(lambda u: u.sum(1), x, box, torch.zeros(2))
    with pytest.raises(ValueError, match="zero noise density"):
        nce_loss(lambda u: u.sum(1), x + 5, box, zero)
    with pytest.raises(ValueError, match="positive definite"):
        GaussianNoise(torch.zeros(2), -torch.eye(2))
    with pytest.raises(ValueError, match=r"cov must be \(2, 2\)"):
        GaussianNoise(torch.zeros(2), torch.eye(3))
    with pytest.raises(ValueError, match="at least 2 examples"):
        GaussianNoise.fit(torch.zeros(1, 2))
    with pytest.raises(ValueError, match="every high must exceed its low"):
        UniformNoise(1.0, -1.0, (2,))
