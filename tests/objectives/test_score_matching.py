"""Score-matching signs and values pinned against the closed-form quadratic energy
``E(x) = ½ xᵀAx`` (score ``−Ax``, Hessian ``A``), for every variant.

Value checks use fixed inputs (and fixed projections / noise), so they are exact up to
float64 round-off. Minimiser checks use data ``x ~ N(0, σ_d² I)`` and an isotropic model
``A = a I``: the expected loss is a quadratic in ``a`` whose root is known in closed form
(exact/sliced: ``a = 1/σ_d²``; DSM: ``a = 1/(σ_d² + σ²)``), and the Monte-Carlo gradient at
the root must be within 4.5 standard errors of zero, while at ``−a`` (the flipped sign) it
is tens of standard errors away.
"""

from __future__ import annotations

import math

import pytest
import torch

from shortrun.objectives.score_matching import (
    denoising_score_matching,
    exact_score_matching,
    geometric_sigmas,
    ladder_score_matching,
    sliced_score_matching,
)

A = torch.tensor([[2.0, 0.5, 0.0], [0.5, 1.0, -0.3], [0.0, -0.3, 1.5]], dtype=torch.float64)


def quad(a: torch.Tensor):
    return lambda x: 0.5 * ((x @ a) * x).sum(1)


@pytest.fixture
def x() -> torch.Tensor:
    return torch.randn(64, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_exact_sm_equals_half_norm_minus_trace(x):
    out = exact_score_matching(quad(A), x)
    ax = x @ A
    expected = (0.5 * (ax**2).sum(1) - torch.trace(A)).mean()
    assert torch.allclose(out.loss, expected)
    flipped = exact_score_matching(quad(-A), x)  # −E has score +Ax: the trace term flips
    assert torch.allclose(flipped.loss, (0.5 * (ax**2).sum(1) + torch.trace(A)).mean())


@pytest.mark.parametrize("vr", [False, True])
@pytest.mark.parametrize("kind", ["rademacher", "gaussian"])
def test_sliced_sm_values(x, vr, kind):
    g = torch.Generator().manual_seed(1)
    v = (torch.randint(0, 2, (3, *x.shape), generator=g) * 2 - 1).double() if kind == "rademacher" \
        else torch.randn(3, *x.shape, generator=g, dtype=torch.float64)
    out = sliced_score_matching(quad(A), x, projections=v, variance_reduced=vr)
    ax = x @ A
    vav = torch.einsum("pbi,ij,pbj->pb", v, A, v)
    half = 0.5 * (ax**2).sum(1).expand(3, -1) if vr else 0.5 * ((v * ax).sum(-1)) ** 2
    assert torch.allclose(out.loss, (-vav + half).mean())


def test_dsm_value_single_sigma(x):
    eps = torch.randn(x.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    sigma = 0.3
    out = denoising_score_matching(quad(A), x, sigma, noise=eps)
    grad = (x + sigma * eps) @ A  # ∇E at the noisy point
    assert torch.allclose(out.loss, (0.5 * ((grad - eps / sigma) ** 2).sum(1)).mean())


def test_dsm_ladder_value_with_conditional_energy(x):
    sigmas = geometric_sigmas(1.0, 0.1, 4).double()
    levels = torch.arange(64) % 4
    eps = torch.randn(x.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)

    def energy(z, sigma):  # E(x, σ) = ½ xᵀAx / σ²: a different quadratic at every level
        return quad(A)(z) / sigma**2

    out = ladder_score_matching(energy, x, sigmas, levels=levels, noise=eps)
    s = sigmas[levels][:, None]
    grad = ((x + s * eps) @ A) / s**2
    assert torch.allclose(out.loss, (0.5 * ((s * grad - eps) ** 2).sum(1)).mean())


@pytest.mark.parametrize("variant", ["exact", "ssm", "ssm_vr", "dsm", "dsm_ladder"])
def test_minimiser_and_sign(variant):
    sd, sigma, n = 0.7, 0.4, 2000
    g = torch.Generator().manual_seed(5)
    x = sd * torch.randn(n, 2, generator=g, dtype=torch.float64)
    eps = torch.randn(n, 2, generator=g, dtype=torch.float64)
    v = torch.randn(1, n, 2, generator=g, dtype=torch.float64)
    sigmas = torch.tensor([sigma], dtype=torch.float64)

    def per_example_grad(a: float) -> torch.Tensor:
        """d loss_i / d a for A = a I, one entry per example: ``a`` is copied per row, so
        one backward pass of ``n · mean loss`` gives every per-example derivative."""
        param = torch.full((n,), a, dtype=torch.float64, requires_grad=True)

        def energy(z):
            return 0.5 * param * (z**2).sum(1)

        if variant == "exact":
            out = exact_score_matching(energy, x)
        elif variant.startswith("ssm"):
            out = sliced_score_matching(energy, x, projections=v,
                                        variance_reduced=variant == "ssm_vr")
        elif variant == "dsm":
            out = denoising_score_matching(energy, x, sigma, noise=eps)
        else:
            out = ladder_score_matching(lambda z, s: energy(z), x, sigmas,
                                        levels=torch.zeros(n, dtype=torch.long), noise=eps)
        (grad,) = torch.autograd.grad(out.loss * n, param)
        return grad

    a_star = 1 / sd**2 if variant in ("exact", "ssm", "ssm_vr") else 1 / (sd**2 + sigma**2)
    g_star = per_example_grad(a_star)
    se = float(g_star.std()) / math.sqrt(n)
    assert abs(float(g_star.mean())) < 4.5 * se, (float(g_star.mean()), se)
    g_flip = per_example_grad(-a_star)  # the inverted-energy bug: far from stationary
    assert float(g_flip.mean()) < -10 * float(g_flip.std()) / math.sqrt(n)


def test_bad_arguments_are_refused_with_a_message(x):
    with pytest.raises(ValueError, match="sigma must be > 0"):
        denoising_score_matching(quad(A), x, 0.0)
    with pytest.raises(ValueError, match="n_projections must be >= 1"):
        sliced_score_matching(quad(A), x, n_projections=0)
    with pytest.raises(ValueError, match="projection kind must be 'rademacher' or 'gaussian'"):
        sliced_score_matching(quad(A), x, kind="uniform")
    with pytest.raises(ValueError, match="need 0 < sigma_min <= sigma_max"):
        geometric_sigmas(0.1, 1.0, 3)
    with pytest.raises(ValueError, match="at least one level"):
        geometric_sigmas(1.0, 0.1, 0)


def test_geometric_ladder_has_equal_ratios():
    s = geometric_sigmas(1.0, 0.01, 5)
    assert torch.allclose(s[:-1] / s[1:], torch.full((4,), 10 ** 0.5))
    assert float(s[0]) == pytest.approx(1.0) and float(s[-1]) == pytest.approx(0.01)
