"""Models ``nce`` and ``ed``: the update by value against the losses written out by hand."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from shortrun.data.base import DataInfo, LoadedData
from shortrun.energies.mlp import MLPEnergy
from shortrun.errors import ConfigError
from shortrun.models.chain_free import ED, NCE
from shortrun.models.registry import build_model
from shortrun.objectives.nce import CustomNoise
from shortrun.train.config import resolve

VECTOR = DataInfo((2,), "vector")
BINARY = DataInfo((6,), "binary", 0.0, 1.0)


def make(recipe: str, *overrides: str, info: DataInfo = VECTOR):
    torch.manual_seed(0)
    cfg = resolve(recipe, ["model.hidden=8", "model.depth=2", "train.grad_clip=null",
                           *overrides])
    return build_model(cfg, info)


def zero_lr(model) -> dict[str, torch.optim.Optimizer]:
    return {"main": torch.optim.SGD(model.parameters(), lr=0.0)}


def test_nce_update_is_the_logistic_loss_written_out(monkeypatch) -> None:
    """With the noise pinned (draws and a log-density that is not flat), the gradients of the
    energy and of log Z are those of ``−(1/B)[Σ log σ(G(x)) + Σ log σ(−G(y))]``,
    ``G = −E − c − log p_n − log ν``."""
    model = make("nce_8gaussians", "model.noise_ratio=2.0")
    with torch.no_grad():
        model.log_z.fill_(0.3)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 2, generator=g)
    y = 2 * torch.randn(16, 2, generator=g)
    log_pn = lambda u: -0.25 * u.pow(2).sum(1) - math.log(8 * math.pi)  # noqa: E731  N(0, 2I)
    monkeypatch.setattr(model, "noise_distribution",
                        lambda: CustomNoise(lambda n, gen: y.clone(), log_pn))
    twin, c = copy.deepcopy(model.energy), torch.tensor(0.3, requires_grad=True)
    g_x = -twin(x) - c - log_pn(x) - math.log(2.0)
    g_y = -twin(y) - c - log_pn(y) - math.log(2.0)
    want_loss = -(F.logsigmoid(g_x).sum() + F.logsigmoid(-g_y).sum()) / 8
    want = torch.autograd.grad(want_loss, [*twin.parameters(), c])
    metrics = model.training_step(x, 0, zero_lr(model))
    for p, w in zip([*model.energy.parameters(), model.log_z], want, strict=True):
        torch.testing.assert_close(p.grad, w, rtol=1e-5, atol=1e-6)
    assert metrics["loss"] == pytest.approx(float(want_loss.detach()), rel=1e-5)
    assert metrics["log_z"] == pytest.approx(0.3)
    acc = 0.5 * float((g_x > 0).float().mean() + (g_y < 0).float().mean())
    assert metrics["accuracy"] == pytest.approx(acc)


@pytest.mark.parametrize("noise", ["gaussian", "uniform"])
def test_nce_noise_is_fitted_to_the_training_data_and_kept_in_buffers(noise) -> None:
    model = make("nce_8gaussians", f"model.noise={noise}", "model.noise_scale=0.5")
    x = torch.randn(500, 2, generator=torch.Generator().manual_seed(2)) * torch.tensor([1., 3.])
    model.on_train_start(LoadedData(train=x, info=VECTOR))
    fresh = make("nce_8gaussians", f"model.noise={noise}", "model.noise_scale=0.5")
    fresh.load_state_dict(model.state_dict())
    dist = fresh.noise_distribution()
    if noise == "gaussian":  # the data's mean and covariance, the std widened by 0.5
        torch.testing.assert_close(dist.mean.float(), x.mean(0), rtol=0, atol=1e-5)
        want = torch.cov(x.T.double()) * 0.25 + 1e-4 * torch.eye(2, dtype=torch.float64)
        torch.testing.assert_close(dist.chol @ dist.chol.T, want)
    else:  # the bounding box, half its width added on each side
        lo, hi = x.min(0).values, x.max(0).values
        torch.testing.assert_close(dist.low, lo - 0.5 * (hi - lo))
        torch.testing.assert_close(dist.high, hi + 0.5 * (hi - lo))


def test_ed_update_is_the_loss_written_out_with_the_papers_perturbation() -> None:
    """Same global RNG draws: ``y = x + √t ξ``, ``x⁻_j = y + √t ξ'_j``, and the gradient of
    ``mean_i log(w/M + (1/M) Σ_j exp(E(x_i) − E(x⁻_ij)))``."""
    model = make("ed_8gaussians", "model.ed_m=3", "model.ed_t=0.2", "model.ed_w=2.0")
    x = torch.randn(5, 2, generator=torch.Generator().manual_seed(3))
    twin = copy.deepcopy(model.energy)
    torch.manual_seed(11)
    y = x + math.sqrt(0.2) * torch.randn(x.shape)
    x_neg = y + math.sqrt(0.2) * torch.randn((3, *x.shape))
    diffs = twin(x)[None] - torch.stack([twin(x_neg[j]) for j in range(3)])
    want_loss = torch.log(2.0 / 3 + diffs.exp().sum(0) / 3).mean()
    want = torch.autograd.grad(want_loss, list(twin.parameters()))
    torch.manual_seed(11)
    metrics = model.training_step(x, 0, zero_lr(model))
    for p, w in zip(model.energy.parameters(), want, strict=True):
        torch.testing.assert_close(p.grad, w, rtol=1e-5, atol=1e-6)
    assert metrics["loss"] == pytest.approx(float(want_loss.detach()), rel=1e-5)
    assert set(metrics) >= {"energy_pos", "energy_neg", "energy_gap", "w_weight"}


def test_ed_flips_bits_on_binary_data() -> None:
    model = make("ed_8gaussians", "model.perturbation=auto", info=BINARY)
    assert model.perturbation() == "bernoulli"
    x = (torch.rand(4, 6, generator=torch.Generator().manual_seed(4)) < 0.5).float()
    metrics = model.training_step(x, 0, {"main": torch.optim.Adam(model.parameters())})
    assert math.isfinite(metrics["loss"])


def test_python_models_take_any_energy_and_a_user_noise() -> None:
    noise = CustomNoise(lambda n, g: torch.randn(n, 2, generator=g),
                        lambda u: -0.5 * u.pow(2).sum(1) - math.log(2 * math.pi))
    nce = NCE(MLPEnergy(2, 8, 1), noise=noise, noise_ratio=3.0, info=VECTOR)
    assert nce.noise_distribution() is noise and nce.options.noise_ratio == 3.0
    ed = ED(MLPEnergy(2, 8, 1), ed_m=4, info=VECTOR)
    assert ed.name == "ed" and ed.log_z is None
    assert ed.sample(7, steps=2).shape == (7, 2)


def test_bad_inputs_name_the_problem() -> None:
    with pytest.raises(ConfigError, match="a noise distribution is for NCE"):
        ED(MLPEnergy(2, 8, 1), noise=CustomNoise(lambda n, g: None, lambda u: None))
    with pytest.raises(ConfigError, match="perturbation=bernoulli flips bits"):
        make("ed_8gaussians", "model.perturbation=bernoulli")
    with pytest.raises(ConfigError, match="model.ed_m"):
        make("ed_8gaussians", "model.ed_m=0")
    with pytest.raises(ConfigError, match="model.noise_ratio"):
        make("nce_8gaussians", "model.noise_ratio=-1")
