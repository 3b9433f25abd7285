"""The DAMC amortizer's diffusion (Yu et al. 2023, §3.2) against closed forms on Gaussian targets.

For ``z ~ N(m, S)`` and ``z_λ = α z + σ ε``, the best noise predictor is linear,
``E[ε | z_λ] = σ C⁻¹ (z_λ − α m)`` with ``C = α² S + σ² I``, and the least denoising loss at
``λ`` is ``½ tr(I − σ² C⁻¹)``.
"""

from __future__ import annotations

import math

import pytest
import torch

from shortrun.models.damc_nets import LatentDiffusionAmortizer
from shortrun.samplers.diffusion import (
    ancestral_sample,
    denoising_loss,
    gaussian_min_loss,
    gaussian_optimal_eps,
    logsnr_schedule,
)

MEAN = torch.tensor([1.0, -0.5])
COV = torch.tensor([[1.0, 0.6], [0.6, 0.5]])
CHOL = torch.linalg.cholesky(COV)


def gaussian(n: int, g: torch.Generator) -> torch.Tensor:
    return MEAN + torch.randn(n, 2, generator=g) @ CHOL.T


def loss_at(eps_fn, lam: float, n: int, g: torch.Generator) -> tuple[float, float]:
    """Monte-Carlo mean of the denoising loss at one noise level, and its standard error."""
    loss = denoising_loss(eps_fn, gaussian(n, g), -5.1, 9.8, g, logsnr=torch.full((n,), lam))
    return float(loss.mean()), float(loss.std() / math.sqrt(n))


def optimal(z, lam):
    return gaussian_optimal_eps(z.double(), lam.double(), MEAN.double(), COV.double()).float()


def test_schedule_runs_from_logsnr_max_to_logsnr_min():
    lam = logsnr_schedule(torch.tensor([0.0, 0.5, 1.0]), -5.1, 9.8)
    assert lam[0].item() == pytest.approx(9.8, abs=1e-4)
    assert lam[2].item() == pytest.approx(-5.1, abs=1e-4)
    assert lam[0] > lam[1] > lam[2]


@pytest.mark.parametrize("lam", [-3.0, 0.0, 3.0])
def test_optimal_linear_predictor_attains_the_closed_form_minimum(lam):
    g = torch.Generator().manual_seed(0)
    mc, se = loss_at(optimal, lam, 40000, g)
    assert abs(mc - gaussian_min_loss(lam, COV)) < 4 * se
    zero, _ = loss_at(lambda z, _: torch.zeros_like(z), lam, 40000, g)
    assert zero == pytest.approx(1.0, abs=0.03)  # ε̂ = 0 costs ½ E‖ε‖² = d/2


def test_ancestral_sampler_with_the_exact_predictor_draws_the_target():
    g = torch.Generator().manual_seed(1)
    n = 4000
    z = ancestral_sample(optimal, n, 2, 100, -5.1, 9.8, generator=g)
    se = (COV.diag() / n).sqrt()
    assert ((z.mean(0) - MEAN).abs() < 4 * se).all()
    assert ((z.var(0) - COV.diag()).abs() < 4 * COV.diag() * math.sqrt(2 / n)).all()


def test_amortizer_denoising_loss_goes_to_its_known_minimum():
    torch.manual_seed(0)
    net = LatentDiffusionAmortizer(2, torch.nn.Identity(), emb=4, width=16, time_dim=16)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    g = torch.Generator().manual_seed(2)
    for _ in range(600):
        loss = net.loss(gaussian(128, g), None).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    def eps(z, lam):
        return net.net(z, lam, net.null.expand(len(z), -1))

    with torch.no_grad():
        for lam in (-3.0, 0.0, 3.0):
            best = gaussian_min_loss(lam, COV)
            mc, se = loss_at(eps, lam, 20000, g)
            assert mc > best - 4 * se  # nothing beats the Bayes predictor
            assert mc - best < 0.1 * best + 4 * se, (lam, mc, best)
