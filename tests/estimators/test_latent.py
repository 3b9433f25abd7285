"""The latent-model marginal likelihood (:mod:`shortrun.estimators.latent`) on a linear-Gaussian
model with a quadratic tilt, whose marginal is closed form:

``f(z) = −½ zᵀAz`` over ``N(0, I)`` gives ``p_α = N(0, (I + A)⁻¹)``, ``Z_α = det(I + A)^{−½}``,
and ``x = Wz + b + σε`` gives ``p(x) = N(b, W (I + A)⁻¹ Wᵀ + σ²I)``.

Tolerances: every ``log p(x)`` within 3 of its own standard errors (AIS and ``log Z_α``
combined), the BDMC gap closing as the number of intermediate distributions grows."""

from __future__ import annotations

import math

import pytest
import torch

from shortrun.estimators.annealing import AISSettings
from shortrun.estimators.latent import (
    LatentModel,
    bdmc,
    latent_log_likelihood,
    prior_log_partition,
    simulate,
)

K, D, SIGMA = 2, 5, 0.5


def linear_gaussian(tilted: bool = True):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(D, K, generator=g, dtype=torch.float64)
    bias = 0.1 * torch.randn(D, generator=g, dtype=torch.float64)
    a = torch.diag(torch.tensor([0.5, 2.0], dtype=torch.float64)) if tilted else \
        torch.zeros(K, K, dtype=torch.float64)

    def log_lik(z, x):
        r = x - z @ w.t() - bias
        return -(r * r).sum(1) / (2 * SIGMA ** 2) - 0.5 * D * math.log(2 * math.pi * SIGMA ** 2)

    def prior_energy(z):
        return 0.5 * (z * z).sum(1) + 0.5 * ((z @ a) * z).sum(1)

    def sample_x(z, gen):
        return z @ w.t() + bias + SIGMA * torch.randn(z.shape[0], D, generator=gen,
                                                      dtype=z.dtype)

    model = LatentModel(log_lik, prior_energy, K, 1.0, tilted, sample_x, torch.float64)
    eye = torch.eye(K, dtype=torch.float64)
    cov = w @ torch.linalg.inv(eye + a) @ w.t() + SIGMA ** 2 * torch.eye(D, dtype=torch.float64)
    marginal = torch.distributions.MultivariateNormal(bias, cov)
    return model, marginal, -0.5 * float(torch.logdet(eye + a))


def test_prior_log_partition_within_3se():
    model, _, truth = linear_gaussian()
    lz = prior_log_partition(model, 50_000, generator=torch.Generator().manual_seed(1))
    assert abs(lz.log_z - truth) < 3 * lz.stderr, (lz.log_z - truth, lz.stderr)
    assert prior_log_partition(linear_gaussian(False)[0]).log_z == 0.0


def test_marginal_likelihood_within_3se_of_closed_form():
    model, marginal, _ = linear_gaussian()
    g = torch.Generator().manual_seed(2)
    torch.manual_seed(10)
    x = marginal.sample((10,))
    lz = prior_log_partition(model, 50_000, generator=g)
    est = latent_log_likelihood(model, x, 10, AISSettings(n_betas=200), log_z_prior=lz,
                                generator=g)
    err = est.log_px - marginal.log_prob(x)
    se = torch.sqrt(est.stderr ** 2 + lz.stderr ** 2)
    assert bool((err.abs() < 3 * se).all()), (err, se)
    mean, mean_se = est.mean()
    assert abs(mean - float(marginal.log_prob(x).mean())) < 3 * mean_se


def test_sandwich_gap_closes_as_the_path_lengthens():
    model, _, _ = linear_gaussian()
    g = torch.Generator().manual_seed(3)
    lz = prior_log_partition(model, 50_000, generator=g)
    short = bdmc(model, 10, 8, AISSettings(n_betas=5), log_z_prior=lz, generator=g)
    long = bdmc(model, 10, 8, AISSettings(n_betas=200), log_z_prior=lz, generator=g)
    assert short.method == "rejection"
    assert short.gap > 3 * (short.lower_se + short.upper_se)  # the bounds bracket, apart
    assert 0 <= long.gap + 3 * (long.lower_se + long.upper_se) and long.gap < short.gap / 4


def test_simulated_prior_draws_have_the_tilted_covariance():
    """Rejection draws of p_α = N(0, (I + A)⁻¹): per-coordinate variance within 4 SE."""
    model, _, _ = linear_gaussian()
    g = torch.Generator().manual_seed(4)
    lz = prior_log_partition(model, 20_000, generator=g)
    z, x, method = simulate(model, 4000, lz, generator=g)
    assert method == "rejection" and x.shape == (4000, D)
    var = torch.tensor([1 / 1.5, 1 / 3.0], dtype=torch.float64)
    se = var * math.sqrt(2 / 4000)
    assert bool(((z.var(0) - var).abs() < 4 * se).all())


def test_bad_inputs_name_the_problem():
    model, marginal, _ = linear_gaussian()
    torch.manual_seed(11)
    x = marginal.sample((3,))
    with pytest.raises(ValueError, match="n_chains must be >= 2"):
        latent_log_likelihood(model, x, 1)
    with pytest.raises(ValueError, match="one exact posterior draw per row"):
        latent_log_likelihood(model, x, 2, z_exact=torch.zeros(2, K, dtype=torch.float64))
    no_sampler = LatentModel(model.log_lik, model.prior_energy, K)
    with pytest.raises(ValueError, match="needs model.sample_x"):
        simulate(no_sampler, 2, prior_log_partition(model, 100))


def test_posterior_fitted_base_keeps_the_estimate_and_the_bounds():
    """Starting AIS from a Gaussian fitted to pilot runs (any normalised base is unbiased in
    p(x)): still within 3 SE of the closed form, and the sandwich still brackets."""
    model, marginal, _ = linear_gaussian()
    g = torch.Generator().manual_seed(5)
    torch.manual_seed(10)
    x = marginal.sample((10,))
    lz = prior_log_partition(model, 50_000, generator=g)
    est = latent_log_likelihood(model, x, 32, AISSettings(n_betas=100), log_z_prior=lz,
                                pilot_betas=20, generator=g)
    err = est.log_px - marginal.log_prob(x)
    se = torch.sqrt(est.stderr ** 2 + lz.stderr ** 2)
    assert bool((err.abs() < 3 * se).all()), (err, se)
    sw = bdmc(model, 10, 8, AISSettings(n_betas=50), log_z_prior=lz, pilot_betas=20,
              generator=g)
    assert sw.gap + 3 * (sw.lower_se + sw.upper_se) >= 0 and sw.gap < 0.3
