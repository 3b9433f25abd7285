"""Generic AIS (:mod:`shortrun.estimators.annealing`) against closed-form Gaussian partition
functions, d = 2, 10, 50, isotropic and ill-conditioned (condition number 100).

Tolerance: each estimate within 3 of its own delta-method standard errors *and* within 0.02
nats of the truth (the issue's target); fixed seeds."""

from __future__ import annotations

import math

import pytest
import torch

from shortrun.estimators.annealing import (
    AISSettings,
    ais_chains,
    ais_log_partition,
    sigmoid_betas,
    summarise,
)
from shortrun.estimators.bases import GaussianBase


def gaussian_target(d: int, cond: float, seed: int = 0):
    """``E(x) = ½ (x − m)ᵀ P (x − m)``, ``log Z = (d/2) log 2π − ½ log det P``, and 1000
    exact draws (the "data" the base is fitted to)."""
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    ev = (torch.logspace(0, math.log10(cond), d, dtype=torch.float64) if cond > 1
          else torch.full((d,), 4.0, dtype=torch.float64))
    precision = (q * ev) @ q.t()
    m = 0.5 * torch.randn(d, generator=g, dtype=torch.float64)

    def energy(x: torch.Tensor) -> torch.Tensor:
        r = x - m
        return 0.5 * ((r @ precision) * r).sum(1)

    log_z = 0.5 * d * math.log(2 * math.pi) - 0.5 * float(ev.log().sum())
    chol = torch.linalg.cholesky(torch.linalg.inv(precision))
    data = m + torch.randn(1000, d, generator=g, dtype=torch.float64) @ chol.t()
    return energy, log_z, data


@pytest.mark.parametrize("d", [2, 10, 50])
@pytest.mark.parametrize("cond", [1.0, 100.0])
def test_gaussian_log_z_within_3se_and_002_nats(d, cond):
    energy, truth, data = gaussian_target(d, cond)
    n_betas = 600 if d == 50 else 300
    est = ais_log_partition(energy, GaussianBase.fit(data), 200, AISSettings(n_betas=n_betas),
                            generator=torch.Generator().manual_seed(1))
    err = est.log_z - truth
    assert abs(err) < 3 * est.stderr + 1e-9 or abs(err) < 1e-3, (err, est.stderr)
    assert abs(err) < 0.02, (err, est.stderr)
    assert 0.4 < est.accept < 0.9
    assert 0 < est.ess <= 200 and est.log_weights.shape == (200,)


def test_hmc_kernel_and_unwhitened_standard_base():
    energy, truth, _ = gaussian_target(2, 1.0)
    base = GaussianBase.standard((2,), dtype=torch.float64)
    est = ais_log_partition(energy, base, 200, AISSettings(n_betas=200, kernel="hmc",
                                                           n_leapfrog=3),
                            generator=torch.Generator().manual_seed(3))
    assert abs(est.log_z - truth) < 3 * est.stderr, (est.log_z - truth, est.stderr)


def test_reverse_ais_from_exact_draws_bounds_from_above():
    """Reverse AIS from exact target draws: E[exp w] = 1/Z, so −log mean exp w ≥ log Z in
    expectation; with few intermediate distributions the forward estimate sits below and the
    reverse above the truth (Grosse et al. 2015 §4), both by more than their errors."""
    energy, truth, data = gaussian_target(10, 100.0)
    base = GaussianBase.standard((10,), dtype=torch.float64)
    s, g = AISSettings(n_betas=10), torch.Generator().manual_seed(0)
    fwd, _, _ = ais_chains(energy, base.log_prob, base.sample(200, g), s, generator=g)
    rev, _, _ = ais_chains(energy, base.log_prob, data[:200], s, reverse=True, generator=g)
    lo, lo_se, _ = summarise(fwd)
    hi, hi_se, _ = summarise(rev)
    assert float(lo) + 3 * float(lo_se) < truth < -float(hi) - 3 * float(hi_se)


def test_schedule_ends_and_summary():
    b = sigmoid_betas(50)
    assert float(b[0]) == 0.0 and float(b[-1]) == 1.0 and bool((b[1:] > b[:-1]).all())
    lm, se, ess = summarise(torch.zeros(10, dtype=torch.float64))
    assert float(lm) == 0.0 and float(se) == 0.0 and float(ess) == pytest.approx(10.0)


@pytest.mark.parametrize("kw, message", [
    (dict(n_betas=1), "n_betas >= 2"),
    (dict(n_steps=0), "n_steps >= 1"),
    (dict(kernel="gibbs"), "kernel must be one of mala, hmc"),
    (dict(step_size=0.0), "step_size must be > 0"),
    (dict(target_accept=1.0), "target_accept must be in"),
])
def test_bad_settings_name_the_problem(kw, message):
    base = GaussianBase.standard((2,))
    with pytest.raises(ValueError, match=message):
        ais_log_partition(lambda x: (x * x).sum(1), base, 4, AISSettings(**kw))


def test_bad_runs_betas_and_fit_name_the_problem():
    base = GaussianBase.standard((2,))
    energy = lambda x: (x * x).sum(1)  # noqa: E731
    with pytest.raises(ValueError, match="at least 2 runs"):
        ais_log_partition(energy, base, 1)
    with pytest.raises(ValueError, match="from 0 to 1"):
        ais_log_partition(energy, base, 4, betas=torch.tensor([0.0, 0.5]))
    with pytest.raises(ValueError, match="must not decrease"):
        ais_log_partition(energy, base, 4, betas=torch.tensor([0.0, 0.6, 0.5, 1.0]))
    with pytest.raises(ValueError, match="at least 2 data points"):
        GaussianBase.fit(torch.zeros(1, 3))
