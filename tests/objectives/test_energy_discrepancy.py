"""Energy discrepancy: the loss written out, the perturbations' moments, and the optimum of a
quadratic energy fitted to Gaussian data in the paper's M → ∞ limit."""

from __future__ import annotations

import math

import pytest
import torch
from sandwich import minimise, sandwich_se

from shortrun.objectives.energy_discrepancy import energy_discrepancy, perturb


def small_energy() -> torch.nn.Module:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    return net.double()


@pytest.mark.parametrize("w", [0.0, 1.0, 3.0])
def test_gradient_equals_autograd_of_the_loss_written_out(w: float) -> None:
    """``mean_i log(w/M + (1/M) Σ_j exp(E(x_i) − E(x⁻_ij)))`` by hand, no logsumexp."""
    net = small_energy()
    energy = lambda u: net(u).squeeze(-1)  # noqa: E731
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 2, generator=g, dtype=torch.float64)
    x_neg = perturb(x, 5, t=0.3, generator=g)
    out = energy_discrepancy(energy, x, w=w, x_neg=x_neg)
    got = torch.autograd.grad(out.loss, list(net.parameters()))
    terms = []
    for i in range(8):
        inner = w / 5 + sum(torch.exp(energy(x[i:i + 1]) - energy(x_neg[j, i:i + 1]))
                            for j in range(5)) / 5
        terms.append(torch.log(inner))
    want_loss = torch.cat(terms).mean()
    want = torch.autograd.grad(want_loss, list(net.parameters()))
    assert out.loss.item() == pytest.approx(want_loss.item(), rel=1e-12)
    for a, b in zip(got, want, strict=True):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)


def test_metrics_are_the_energies_and_the_share_of_w() -> None:
    """A linear energy E(x) = x₁ with the negatives one unit above the data: every difference
    is −1, so w's softmax share is w / (w + M e⁻¹)."""
    x = torch.zeros(4, 2)
    x_neg = torch.zeros(3, 4, 2)
    x_neg[..., 0] = 1.0
    out = energy_discrepancy(lambda u: u[:, 0], x, w=2.0, x_neg=x_neg)
    assert out.metrics["energy_pos"] == 0.0 and out.metrics["energy_neg"] == 1.0
    assert out.metrics["energy_gap"] == 1.0
    assert out.metrics["w_weight"] == pytest.approx(2 / (2 + 3 * math.exp(-1)), rel=1e-6)
    assert out.loss.item() == pytest.approx(math.log(2 / 3 + math.exp(-1)), abs=1e-6)
    assert out.x_neg is x_neg


def test_gaussian_perturbation_has_variance_2t_and_shares_y() -> None:
    """``x⁻ − x = √t (ξ + ξ'_j)``: variance 2t per coordinate, covariance t between two
    negatives of one example. 4·10⁴ pairs: the SE of a variance estimate near 2t is about
    2t·√(2/n) = 0.7 % of it, so 5 % is over 7 SE."""
    t = 0.3
    x = torch.full((20_000, 2), 5.0)
    d = perturb(x, 2, t=t, generator=torch.Generator().manual_seed(3)) - x
    assert d.var().item() == pytest.approx(2 * t, rel=0.05)
    cov = (d[0] * d[1]).mean().item()
    assert cov == pytest.approx(t, rel=0.05)


def test_bernoulli_perturbation_flips_each_bit_twice_with_the_given_rate() -> None:
    """``x⁻`` differs from ``x`` where exactly one of two independent ε-flips happened:
    probability 2ε(1 − ε); two negatives of one example agree unless one of their own flips
    happened: 1 − 2ε(1 − ε). 10⁵ bits: SE ≤ 0.0016."""
    eps = 0.1
    x = (torch.rand(1000, 100, generator=torch.Generator().manual_seed(4)) < 0.5).float()
    xn = perturb(x, 2, perturbation="bernoulli", flip_prob=eps,
                 generator=torch.Generator().manual_seed(5))
    assert set(xn.unique().tolist()) <= {0.0, 1.0}
    p = 2 * eps * (1 - eps)
    assert (xn[0] != x).float().mean().item() == pytest.approx(p, abs=0.008)
    assert (xn[0] == xn[1]).float().mean().item() == pytest.approx(1 - p, abs=0.008)


def quadratic(theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``½ a (x − μ)²`` with ``θ = (μ, log a)``; data N(m, v) have the optimum (m, −log v)."""
    return 0.5 * theta[1].exp() * (x[:, 0] - theta[0]) ** 2


M_MEAN, M_VAR, T = 0.7, 0.5, 0.25


def fixed_draws(m: int, n: int = 1000) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(6)
    x = M_MEAN + math.sqrt(M_VAR) * torch.randn(n, 1, generator=g, dtype=torch.float64)
    return x, perturb(x, m, t=T, generator=g)


def test_quadratic_energy_fit_to_gaussian_data_recovers_mean_and_precision() -> None:
    """ED's minimiser is −log p_data + const for any t (Schröder et al. 2023, Theorem 1) and
    the estimator tends to ED as M → ∞: at M = 32 the fit of ``½ a (x − μ)²`` to N(m, v) data
    lands within 4 sandwich standard errors of (m, 1/v)."""
    x, x_neg = fixed_draws(32)
    groups = 20

    def total(theta: torch.Tensor) -> torch.Tensor:
        return energy_discrepancy(lambda u: quadratic(theta, u), x, w=1.0, x_neg=x_neg).loss

    def group_losses(theta: torch.Tensor) -> torch.Tensor:
        return torch.stack([energy_discrepancy(lambda u: quadratic(theta, u), x[k::groups],
                                               w=1.0, x_neg=x_neg[:, k::groups]).loss
                            for k in range(groups)])

    fit = minimise(total, torch.zeros(2, dtype=torch.float64))
    se = sandwich_se(group_losses, fit, total)
    want = torch.tensor([M_MEAN, -math.log(M_VAR)], dtype=torch.float64)
    assert float(se.max()) < 0.15
    err = (fit - want).abs()
    assert bool((err < 4 * se).all()), f"|θ̂ − θ*| = {err.tolist()}, 4 SE = {(4 * se).tolist()}"


def test_one_negative_without_w_is_not_the_limit() -> None:
    """At M = 1, w = 0 the loss is mean E(x) − E(x⁻), which rewards an ever sharper energy:
    at the true parameters its gradient in log a is ½ a · (−2t) ≈ −t/v, many SE from zero."""
    x, x_neg = fixed_draws(1)
    theta = torch.tensor([M_MEAN, -math.log(M_VAR)], dtype=torch.float64, requires_grad=True)
    loss = energy_discrepancy(lambda u: quadratic(theta, u), x, w=0.0, x_neg=x_neg).loss
    (grad,) = torch.autograd.grad(loss, theta)
    assert grad[1].item() == pytest.approx(-T / M_VAR, rel=0.15)


def test_bad_inputs_name_the_problem() -> None:
    x = torch.zeros(4, 2)
    e = lambda u: u.sum(1)  # noqa: E731
    with pytest.raises(ValueError, match="M >= 1"):
        energy_discrepancy(e, x, m=0)
    with pytest.raises(ValueError, match="t > 0"):
        energy_discrepancy(e, x, t=0.0)
    with pytest.raises(ValueError, match="w must be >= 0"):
        energy_discrepancy(e, x, w=-1.0)
    with pytest.raises(ValueError, match="0 < flip_prob < 1"):
        energy_discrepancy(e, x, perturbation="bernoulli", flip_prob=1.5)
    with pytest.raises(ValueError, match=r"must be \{0, 1\}"):
        energy_discrepancy(e, x + 0.5, perturbation="bernoulli")
    with pytest.raises(ValueError, match="perturbation must be one of gaussian, bernoulli"):
        energy_discrepancy(e, x, perturbation="laplace")
    with pytest.raises(ValueError, match=r"x_neg must have shape \(M, 4, 2\)"):
        energy_discrepancy(e, x, x_neg=torch.zeros(3, 5, 2))
