"""Independence Metropolis–Hastings (Tierney 1994, §2.3.1) with a non-uniform proposal: the
``q(x)/q(y)`` factor only matters when q is not flat, so the stationary law is checked with a
Gaussian proposal that is wider than, and off-centre from, a Gaussian target."""

import math

import torch

from shortrun.samplers.independence import independence_mh, noise_log_density
from shortrun.samplers.sources import NoiseSource


def test_normal_noise_log_density_is_the_gaussian_up_to_a_constant():
    q = noise_log_density(NoiseSource((3,), "normal", std=1.5))
    x = torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]])
    got = q(x)
    want = torch.distributions.Normal(0.0, 1.5).log_prob(x).sum(1)
    torch.testing.assert_close(got - got[0], want - want[0])


def test_stationary_law_is_the_target_with_a_gaussian_proposal():
    """Target N(1, 0.7²), proposal N(0, 1.5²) (so p/q is bounded). 4,000 chains started at
    proposal draws, 60 proposals each (acceptance ≈ 0.5: the start is forgotten to ≈ 0.5⁶⁰).
    Mean and variance within 4 standard errors (√(var/n) and var·√(2/n)); a chain that
    used q(y)/q(x) would target p·q = N(0.82, 0.63²) instead (mean off by ≈ 16 SE)."""
    mu, sd, n = 1.0, 0.7, 4000
    source = NoiseSource((1,), "normal", std=1.5)
    g = torch.Generator().manual_seed(0)

    def energy(x):
        return ((x.flatten(1) - mu) ** 2).sum(1) / (2 * sd**2)

    x0 = source.start(n, generator=g)
    x, info = independence_mh(energy, x0, lambda k: source.start(k, generator=g),
                              noise_log_density(source), 60, generator=g)
    var = sd**2
    assert abs(float(x.mean()) - mu) < 4 * math.sqrt(var / n)
    assert abs(float(x.var()) - var) < 4 * var * math.sqrt(2 / n)
    assert 0.3 < info.mean_acceptance < 0.9
