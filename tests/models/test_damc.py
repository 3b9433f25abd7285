"""DAMC (Yu et al. 2023): the amortized chains on a linear-Gaussian latent model, where the
posterior is known in closed form, and the mode's wiring into LEBM (options, optimisers, errors).

The model: ``x = W z + ε``, ``z ~ N(0, I)``, ``ε ~ N(0, σ²I)``; the posterior is
``N(μ(x), Σ)`` with ``Σ = (I + WᵀW/σ²)⁻¹``, ``μ(x) = Σ Wᵀ x / σ²``. The posterior chain is ULA
with step ``s``, whose own stationary law is ``N(μ(x), V)``, ``V = s²(I − A²)⁻¹``,
``A = I − ½s²Σ⁻¹`` (exact for the discretised chain); that is what DAMC amortizes.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from shortrun.data.base import DataInfo
from shortrun.errors import ConfigError
from shortrun.models.lebm import LEBM
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

W = torch.tensor([[0.5, 0.0], [0.0, 0.5], [0.5, 0.5]])
SIGMA, STEP = 0.5, 0.4
VECTOR = DataInfo((3,), "vector", -10.0, 10.0)
SMALL = dict(damc_width=16, damc_emb=16, damc_time_emb=16, damc_encoder_width=4, damc_steps=10)


def linear_gaussian_lebm(**options) -> LEBM:
    torch.manual_seed(0)
    gen = nn.Linear(2, 3, bias=False)
    with torch.no_grad():
        gen.weight.copy_(W)
    return LEBM(gen, None, info=VECTOR, nz=2, llhd_sigma=SIGMA, post_steps=10,
                post_step_size=STEP, prior_sampler="damc", **{**SMALL, **options})


def posterior(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(μ(x), V)``: the mean of ``p(z | x)`` and the ULA chain's stationary covariance."""
    precision = torch.eye(2) + W.T @ W / SIGMA**2
    a = torch.eye(2) - 0.5 * STEP**2 * precision
    return torch.linalg.solve(precision, W.T @ x / SIGMA**2), \
        STEP**2 * torch.linalg.inv(torch.eye(2) - a @ a)


def test_amortized_short_chain_reaches_the_known_posterior():
    m = linear_gaussian_lebm(damc_updates=3, damc_ema=1.0, damc_ema_every=1,
                             damc_mask_prob=0.0)
    # the generator stays W: its optimiser never moves it (lr 0); only φ learns
    opts = {"generator": torch.optim.SGD(m.generator.parameters(), lr=0.0),
            "amortizer": torch.optim.AdamW(m.damc.amortizer.parameters(), lr=3e-3,
                                           betas=(0.5, 0.999), weight_decay=0.0)}
    g = torch.Generator().manual_seed(0)
    xs = torch.randn(512, 2, generator=g) @ W.T + SIGMA * torch.randn(512, 3, generator=g)
    for step in range(250):
        m.training_step(xs[torch.randint(0, 512, (64,), generator=g)], step, opts)
    m.damc.amortizer.n_steps = 100  # the loss is continuous-time: any grid samples the same q_φ
    by_distance = torch.stack([posterior(x)[0] for x in xs]).norm(dim=1).argsort()
    n, k, cold_misses = 500, 8, 0
    for q in (0.5, 0.8, 0.9):  # typical x's, and x's whose posterior sits far from N(0, I)
        x = xs[by_distance[int(q * (len(xs) - 1))]]
        mu, v = posterior(x)
        se_mean, se_var = (v.diag() / n).sqrt(), v.diag() * math.sqrt(2 / (n - 1))
        rows = x.expand(n, 3)
        z0 = m.damc.amortizer.sample(n, rows, generator=g)
        amortized = m.sample_posterior(rows, k, g, start=z0)
        cold = m.sample_posterior(rows, k, g, start=torch.randn(n, 2, generator=g))
        assert ((amortized.mean(0) - mu).abs() < 4 * se_mean).all(), (amortized.mean(0), mu)
        assert ((amortized.var(0) - v.diag()).abs() < 4 * se_var).all(), (amortized.var(0), v)
        cold_misses += int(((cold.mean(0) - mu).abs() > 4 * se_mean).any())
        # the amortizer alone sits much nearer the posterior than N(0, I) does
        assert (z0.mean(0) - mu).norm() < mu.norm() / 3
    assert cold_misses >= 1  # the same short chain from N(0, I) has not got there: power
