"""``ed_lebm``: the LEBM prior learned by energy discrepancy, no prior chain in training."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from shortrun.data.base import DataInfo
from shortrun.errors import ConfigError
from shortrun.models.ed_lebm import EDLEBM
from shortrun.models.lebm_nets import Generator
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

MNIST_INFO = DataInfo((1, 28, 28), "image", -1.0, 1.0, 127.5, 127.5)
TINY = ["model.nz=4", "model.ngf=2", "model.ndf=8", "model.prior_steps=5", "model.post_steps=3"]


def make(*overrides: str) -> EDLEBM:
    torch.manual_seed(0)
    cfg = resolve("ed_lebm_mnist", [*TINY, *overrides])
    return build_model(cfg, MNIST_INFO)


def no_prior_chain(*args, **kwargs):
    raise AssertionError("ED-LEBM ran a prior chain in training")


def test_prior_update_is_ed_on_the_prior_energy_at_posterior_samples(monkeypatch) -> None:
    """With ``z⁺`` pinned and the same global RNG draws, the tilt's gradient is that of
    ``mean_i log(w/M + (1/M) Σ_j exp(E_α(z_i) − E_α(z⁻_ij)))``, ``z⁻ = z + √t(ξ + ξ'_j)``,
    ``E_α(z) = −f_α(z) + ‖z‖²/2``; the generator's is ``∇ Σ‖x − g(z⁺)‖²/B``."""
    m = make("model.ed_m=3", "model.ed_t=0.3", "model.ed_w=1.0")
    x = torch.rand(5, 1, 28, 28, generator=torch.Generator().manual_seed(1)) * 2 - 1
    z = torch.randn(5, 4, generator=torch.Generator().manual_seed(2))
    monkeypatch.setattr(m, "sample_posterior", lambda x, *a, **k: z.clone())
    monkeypatch.setattr(m, "sample_prior", no_prior_chain)
    tilt, gen = copy.deepcopy(m.tilt), copy.deepcopy(m.generator)

    def energy(u: torch.Tensor) -> torch.Tensor:
        return -tilt(u).reshape(-1) + u.pow(2).sum(1) / 2

    torch.manual_seed(9)
    y = z + math.sqrt(0.3) * torch.randn(z.shape)
    z_neg = y + math.sqrt(0.3) * torch.randn((3, *z.shape))
    diffs = energy(z)[None] - torch.stack([energy(z_neg[j]) for j in range(3)])
    want_loss = torch.log(1.0 / 3 + diffs.exp().sum(0) / 3).mean()
    want = torch.autograd.grad(want_loss, list(tilt.parameters()))
    want_g = torch.autograd.grad(((x - gen(z)) ** 2).flatten(1).sum(1).mean(),
                                 list(gen.parameters()))
    opts = {"generator": torch.optim.SGD(m.generator.parameters(), lr=0.0),
            "prior": torch.optim.SGD(m.tilt.parameters(), lr=0.0)}
    torch.manual_seed(9)
    metrics = m.training_step(x, 0, opts)
    for p, w in zip(m.tilt.parameters(), want, strict=True):
        torch.testing.assert_close(p.grad, w, rtol=1e-5, atol=1e-6)
    for p, w in zip(m.generator.parameters(), want_g, strict=True):
        torch.testing.assert_close(p.grad, w, rtol=1e-5, atol=1e-6)
    assert metrics["loss_prior"] == pytest.approx(float(want_loss.detach()), rel=1e-5)
    assert set(metrics) >= {"loss", "mse_post", "energy_pos", "energy_neg", "w_weight"}


def test_the_moving_average_follows_the_tilt_and_draws_the_samples(monkeypatch) -> None:
    m = make("model.prior_ema=0.75")
    before = [p.detach().clone() for p in m.tilt.parameters()]
    monkeypatch.setattr(m, "sample_prior", no_prior_chain)
    x = torch.rand(4, 1, 28, 28) * 2 - 1
    m.training_step(x, 0, m.build_optimizers())
    for old, new, avg in zip(before, m.tilt.parameters(), m.tilt_ema.parameters(), strict=True):
        torch.testing.assert_close(avg, 0.75 * old + 0.25 * new.detach())
    with m.averaged_prior():
        assert m.tilt is m.tilt_ema
    assert m.tilt is not m.tilt_ema and not any(p.requires_grad for p in m.tilt_ema.parameters())


def test_damc_amortizer_remains_an_option(monkeypatch) -> None:
    m = make("model.prior_sampler=damc", "model.damc_width=8", "model.damc_emb=8",
             "model.damc_time_emb=8", "model.damc_encoder_width=2", "model.damc_steps=4",
             "model.damc_updates=1")
    monkeypatch.setattr(m, "sample_prior", no_prior_chain)
    metrics = m.training_step(torch.rand(4, 1, 28, 28) * 2 - 1, 0, m.build_optimizers())
    assert math.isfinite(metrics["loss_prior"]) and math.isfinite(metrics["loss_amortizer"])


def test_bad_inputs_name_the_problem() -> None:
    with pytest.raises(ConfigError, match="pass a prior network"):
        EDLEBM(Generator("mnist28", 4, 2))
    with pytest.raises(ConfigError, match="model.ed_t"):
        make("model.ed_t=0")
    with pytest.raises(ConfigError, match="model.prior_ema"):
        make("model.prior_ema=1.0")
