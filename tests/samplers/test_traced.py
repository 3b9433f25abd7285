"""The traced chain drivers: MALA's acceptance on a Gaussian against its closed form, the
Metropolised twin of a tempered Langevin step, and traces that hold the energies of the states
the chains visit."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from shortrun.energies.rbm import BernoulliRBMParams
from shortrun.metrics.chains import acceptance_rate
from shortrun.samplers.gibbs import gibbs_init, gibbs_step
from shortrun.samplers.langevin import langevin_step
from shortrun.samplers.mala import mala_init, mala_step
from shortrun.samplers.traced import (
    gibbs_trace,
    langevin_trace,
    mala_accept_trace,
    metropolised,
    mh_trace,
)


def std_normal_energy(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (x.flatten(1) ** 2).sum(1)


def mala_acceptance_on_std_normal(step_size: float, nodes: int = 120) -> float:
    """Expected acceptance of one MALA step from ``x ~ N(0, 1)`` on ``E = x²/2``.

    With ``h = s²`` the proposal is ``y = (1 − h/2)x + √h ξ`` and the Hastings ratio collapses
    to ``log α = h (x² − y²) / 8`` (the cross terms of the two proposal densities cancel);
    ``E[min(1, α)]`` over ``x, ξ ~ N(0, 1)`` by a 120×120 Gauss–Hermite rule."""
    t, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    h = step_size**2
    x, xi = np.meshgrid(t, t, indexing="ij")
    y = (1 - h / 2) * x + math.sqrt(h) * xi
    alpha = np.minimum(1.0, np.exp(h * (x**2 - y**2) / 8))
    return float((w[:, None] * w[None, :] * alpha).sum())


@pytest.mark.parametrize("step_size", [0.8, 1.5])
def test_mala_acceptance_on_a_gaussian_matches_the_closed_form(step_size):
    """40 000 independent chains started at exact draws take one step: their acceptance rate
    is a mean of independent Bernoullis, within 4.5 standard errors √(p(1−p)/n) of the known
    expectation (0.959 at s = 0.8, 0.746 at s = 1.5)."""
    n = 40_000
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn((n, 1), generator=g, dtype=torch.float64)
    _, trace = mh_trace(mala_step, std_normal_energy, mala_init(std_normal_energy, x0), 1,
                        generator=g, step_size=step_size)
    p = mala_acceptance_on_std_normal(step_size)
    assert trace.accepted.shape == (n, 1) and trace.energy.shape == (n, 1)
    assert abs(acceptance_rate(trace.accepted) - p) < 4.5 * math.sqrt(p * (1 - p) / n)


def test_metropolised_twin_proposes_the_tempered_langevin_step():
    """The twin of ``x − ½s²∇E + sτξ`` is MALA on ``E/τ²`` with step ``sτ``: from the same
    noise it proposes exactly the Langevin step's next state."""
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    s, tau = 0.4, 0.25
    after, _ = langevin_step(std_normal_energy, x, s, tau,
                             generator=torch.Generator().manual_seed(1))
    energy, step = metropolised(std_normal_energy, s, tau)
    _, info = mala_step(energy, mala_init(energy, x), step_size=step,
                        generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(info.proposal, after)
    assert metropolised(std_normal_energy, s, 1.0) == (std_normal_energy, s)
    with pytest.raises(ValueError, match="gradient descent"):
        metropolised(std_normal_energy, s, 0.0)


def test_langevin_trace_records_the_energy_of_every_visited_state():
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(3, 2, generator=g, dtype=torch.float64)
    x, trace = langevin_trace(std_normal_energy, x0, 5, 0.3, generator=g)
    assert trace.energy.shape == (3, 5) and trace.energy.dtype == torch.float64
    assert trace.accepted is None
    torch.testing.assert_close(trace.energy[:, 0], std_normal_energy(x0))
    g = torch.Generator().manual_seed(0)
    torch.randn(3, 2, generator=g, dtype=torch.float64)
    y = x0
    for _ in range(4):
        y, _ = langevin_step(std_normal_energy, y, 0.3, generator=g)
    torch.testing.assert_close(trace.energy[:, 4], std_normal_energy(y))


def test_gibbs_trace_is_the_free_energy_after_every_sweep():
    g = torch.Generator().manual_seed(0)
    params = BernoulliRBMParams(torch.randn(6, 3, generator=g), torch.randn(6, generator=g),
                                torch.randn(3, generator=g))
    v0 = (torch.rand(4, 6, generator=g) < 0.5).float()
    v, trace = gibbs_trace(params, v0, 3, generator=torch.Generator().manual_seed(1))
    state, g = gibbs_init(params, v0), torch.Generator().manual_seed(1)
    for k in range(3):
        state, _ = gibbs_step(params, state, generator=g)
        torch.testing.assert_close(trace.energy[:, k], params.free_energy(state.v).double())
    assert torch.equal(v, state.v) and trace.accepted is None


def test_mala_accept_trace_and_step_counts():
    x0 = torch.zeros(2, 1, dtype=torch.float64)
    trace = mala_accept_trace(std_normal_energy, x0, 7, 0.5,
                              generator=torch.Generator().manual_seed(0))
    assert trace.accepted.shape == (2, 7) and trace.accepted.dtype == torch.bool
    for fn in (lambda: langevin_trace(std_normal_energy, x0, 0, 0.5),
               lambda: gibbs_trace(None, x0, 0)):
        with pytest.raises(ValueError, match="n_steps must be >= 1"):
            fn()
