"""Dual-averaging step-size adaptation (Hoffman & Gelman 2014, Alg. 5) reaches its target
acceptance on Gaussians, for MALA against the closed-form acceptance of the adapted step."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from shortrun.metrics.chains import acceptance_rate
from shortrun.samplers.adapt import HMC_TARGET, MALA_TARGET, dual_averaging
from shortrun.samplers.hmc import hmc_init, hmc_step
from shortrun.samplers.mala import mala_init, mala_step
from shortrun.samplers.traced import mh_trace

D = 10


def std_normal_energy(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (x**2).sum(1)


def mala_expected_acceptance(step_size: float, n: int = 200_000) -> float:
    """Stationary acceptance of MALA on N(0, I_D): ``log α = h(‖x‖² − ‖y‖²)/8`` with ``h = s²``
    and ``y = (1 − h/2)x + √h ξ`` (see tests/samplers/test_traced.py); a Monte Carlo mean of
    200 000 independent terms, standard error under 0.0011."""
    rng = np.random.default_rng(1)
    h = step_size**2
    x = rng.standard_normal((n, D))
    y = (1 - h / 2) * x + math.sqrt(h) * rng.standard_normal((n, D))
    return float(np.minimum(1.0, np.exp(h * ((x**2).sum(1) - (y**2).sum(1)) / 8)).mean())


def test_mala_step_adapts_to_the_target_acceptance():
    """From a step 10× too small, 300 warm-up steps of 200 chains tune MALA on N(0, I₁₀) to a
    step whose exact acceptance is within 0.02 of 0.574 (0.569 at this seed; the averaged
    iterate of dual averaging is not exactly on target, the Monte Carlo error is 0.001)."""
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(200, D, generator=g, dtype=torch.float64)
    state, adapted = dual_averaging(mala_step, std_normal_energy,
                                    mala_init(std_normal_energy, x0), 300, 0.1, generator=g)
    assert len(adapted.step_sizes) == len(adapted.accept) == 300
    assert abs(mala_expected_acceptance(adapted.step_size) - MALA_TARGET) < 0.02
    _, trace = mh_trace(mala_step, std_normal_energy, state, 100, generator=g,
                        step_size=adapted.step_size)
    # 20 000 decisions (0.561 here), correlated within a chain: 0.03 is several standard errors
    assert abs(acceptance_rate(trace.accepted) - MALA_TARGET) < 0.03


def test_hmc_step_adapts_towards_the_target_acceptance():
    """HMC (3 leapfrog steps) on an anisotropic Gaussian: the adapted step's acceptance in a
    following run is within 0.06 of 0.65 (0.689 at this seed: near the target the acceptance
    falls steeply with the step, so the averaged step lands a little short)."""
    scale = torch.linspace(0.5, 1.5, D, dtype=torch.float64)

    def energy(x: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((x / scale) ** 2).sum(1)

    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(400, D, generator=g, dtype=torch.float64) * scale
    state, adapted = dual_averaging(hmc_step, energy, hmc_init(energy, x0), 300, 0.1,
                                    HMC_TARGET, generator=g, n_leapfrog=3)
    _, trace = mh_trace(hmc_step, energy, state, 100, generator=g,
                        step_size=adapted.step_size, n_leapfrog=3)
    assert abs(acceptance_rate(trace.accepted) - HMC_TARGET) < 0.06


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_warmup=0), "n_warmup must be >= 1; got 0"),
    (dict(step_size=0.0), "step_size must be > 0"),
    (dict(target=1.0), r"target acceptance must be in \(0, 1\); got 1.0"),
])
def test_bad_adaptation_settings(kwargs, message):
    x0 = torch.zeros(2, 1)
    args = dict(n_warmup=5, step_size=0.1, target=0.5) | kwargs
    with pytest.raises(ValueError, match=message):
        dual_averaging(mala_step, std_normal_energy, mala_init(std_normal_energy, x0), **args)
