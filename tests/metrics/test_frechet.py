"""Fréchet distance: closed forms, sampling error, symmetry, agreement with sqrtm, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from shortrun.errors import ConfigError
from shortrun.metrics.frechet import (
    FrechetStats,
    frechet_distance,
    frechet_distance_from_stats,
    frechet_stats,
)


def _reference_fd(mu1, s1, mu2, s2) -> float:
    """pytorch-fid's formula: scipy sqrtm of the non-symmetric product Σ₁Σ₂."""
    covmean = scipy.linalg.sqrtm(s1 @ s2).real
    d = mu1 - mu2
    return float(d @ d + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


def _random_spd(rng, d):
    a = rng.standard_normal((d, d))
    return a @ a.T / d + 0.1 * np.eye(d)


def test_diagonal_closed_form():
    # Commuting (diagonal) covariances: d² = ‖Δμ‖² + Σ (√a_i − √b_i)², exactly.
    a, b = np.array([1.0, 4.0, 9.0]), np.array([4.0, 1.0, 9.0])
    mu1, mu2 = np.array([0.0, 1.0, 2.0]), np.array([3.0, 1.0, -2.0])
    value = frechet_distance_from_stats(FrechetStats(mu1, np.diag(a), 10),
                                        FrechetStats(mu2, np.diag(b), 10))
    expected = 9.0 + 16.0 + (1 - 2) ** 2 + (2 - 1) ** 2 + 0.0
    assert value == pytest.approx(expected, rel=1e-12)


def test_general_matrices_match_sqrtm_formula():
    rng = np.random.default_rng(0)
    for d in (2, 5, 16):
        s1, s2 = _random_spd(rng, d), _random_spd(rng, d)
        mu1, mu2 = rng.standard_normal(d), rng.standard_normal(d)
        ours = frechet_distance_from_stats(FrechetStats(mu1, s1, 2), FrechetStats(mu2, s2, 2))
        assert ours == pytest.approx(_reference_fd(mu1, s1, mu2, s2), rel=1e-9, abs=1e-9)


def test_samples_converge_within_sampling_error():
    # N(0, I) vs N(δ, I) in d = 2 with ‖δ‖ = 1: true d² = 1. To first order the estimate
    # fluctuates by 2 δᵀe, e = μ̂₁ − μ̂₂ ~ N(0, 2I/n), so its SE is 2·√(2/n) ≈ 0.028 at
    # n = 10 000; the covariance terms add a bias of order d/n. Tolerance: 4 SE + 4 d/n.
    n, d = 10_000, 2
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, d))
    b = rng.standard_normal((n, d)) + np.array([1.0, 0.0])
    se = 2 * np.sqrt(2 / n)
    assert abs(frechet_distance(a, b) - 1.0) < 4 * se + 4 * d / n


def test_symmetric_and_zero_for_identical_sets():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((500, 8)) @ rng.standard_normal((8, 8))
    b = rng.standard_normal((400, 8)) * 2 + 1
    assert frechet_distance(a, b) == pytest.approx(frechet_distance(b, a), rel=1e-9)
    scale = np.trace(frechet_stats(a).sigma)
    assert 0.0 <= frechet_distance(a, a) < 1e-9 * scale


def test_rank_deficient_covariance_is_finite():
    # Fewer samples than dimensions: Σ is singular, where sqrtm needs its εI offset.
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((10, 32)), rng.standard_normal((10, 32))
    value = frechet_distance(a, b)
    assert np.isfinite(value) and value > 0


def test_stats_are_float64_and_count_samples():
    x = torch.randn(50, 3, dtype=torch.float32)
    s = frechet_stats(x)
    assert s.mu.dtype == np.float64 and s.sigma.dtype == np.float64 and s.n == 50
    np.testing.assert_allclose(s.sigma, np.cov(x.double().numpy(), rowvar=False), rtol=1e-10)
    assert frechet_distance(x, x.numpy() + 1.0) == pytest.approx(3.0, rel=1e-6)


@pytest.mark.parametrize("bad, message", [
    (np.zeros(5), "expected a 2-D array"),
    (np.zeros((1, 3)), "at least 2 feature vectors"),
    (np.array([[0.0, np.nan], [1.0, 1.0]]), "NaN or inf"),
])
def test_bad_features_are_named(bad, message):
    with pytest.raises(ConfigError, match=message):
        frechet_distance(bad, np.zeros((4, 2)))


def test_dimension_mismatch_is_named():
    with pytest.raises(ConfigError, match="feature sizes differ"):
        frechet_distance(np.random.rand(5, 3), np.random.rand(5, 4))
