"""Dual-MCMC teaching: the chains' targets in closed form, the networks' shapes, the update
order. Tiny networks and synthetic images; no dataset files needed."""

import math

import pytest
import torch
from torch import nn

from shortrun.data.base import DataInfo
from shortrun.errors import ConfigError
from shortrun.evaluation.registry import choose_metrics
from shortrun.models.base import OptimOptions
from shortrun.models.dual_mcmc import DualMCMC
from shortrun.models.dual_nets import GaussianEncoder, ResGenerator, ResNetEnergy, gaussian_nll
from shortrun.samplers.langevin import energy_grad
from shortrun.train.config import build_config

IMAGE = DataInfo(shape=(1, 28, 28), kind="image", low=-1.0, high=1.0,
                 raw_scale=127.5, raw_offset=127.5)
OPTIM = OptimOptions(betas=(0.0, 0.9))
TINY = {"nz": 4, "ebm_channels": 4, "gen_channels": 8, "gen_taper": True, "inf_channels": 4,
        "x_steps": 2, "z_steps": 2}


def tiny_config(**model):
    raw = {"data": {"name": "fashion"},
           "model": {"name": "dual_mcmc", **TINY, **model},
           "train": {"steps": 2, "batch_size": 8, "betas": [0.0, 0.9], "progress": False}}
    return build_config(raw)


def tiny_model(**model) -> DualMCMC:
    torch.manual_seed(0)
    return DualMCMC.from_config(tiny_config(**model).model, IMAGE)


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32), (3, 64, 64)])
def test_networks_map_each_supported_size(shape):
    x = torch.rand(2, *shape) * 2 - 1
    energy = ResNetEnergy(shape, channels=4, spectral_norm=True)
    gen = ResGenerator(shape, nz=5, channels=8, taper=True)
    enc = GaussianEncoder(shape, nz=5, channels=4)
    assert energy(x).shape == (2,)
    assert gen(torch.randn(2, 5)).shape == (2, *shape)
    mean, logvar = enc(x)
    assert mean.shape == logvar.shape == (2, 5)


def test_energy_has_no_batchnorm_and_chains_are_independent():
    """E(x_i) must not depend on x_j: the x-chain sums energies over the batch."""
    energy = ResNetEnergy((1, 28, 28), channels=4)
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in energy.modules())
    x = torch.rand(3, 1, 28, 28)
    alone = energy(x[:1])
    with_others = energy(x)[:1]
    torch.testing.assert_close(alone, with_others)


def test_gaussian_nll_equals_torch_distributions():
    torch.manual_seed(1)
    z, mean, logvar = torch.randn(5, 7), torch.randn(5, 7), torch.randn(5, 7)
    ref = -torch.distributions.Normal(mean, torch.exp(0.5 * logvar)).log_prob(z).sum(1)
    torch.testing.assert_close(gaussian_nll(z, mean, logvar), ref)


def test_posterior_energy_is_the_negative_log_joint():
    """U(z) = −log p(x|z) − log p(z) + const, and ∇U = −∇ log p(x, z) (autograd)."""
    model = tiny_model(gen_norm="none", sigma=0.4, prior_sigma=1.5)
    x = torch.rand(6, 1, 28, 28) * 2 - 1
    z = torch.randn(6, 4)

    def log_joint(z):
        lik = torch.distributions.Normal(model.generator(z), 0.4).log_prob(x).flatten(1).sum(1)
        return lik + torch.distributions.Normal(0.0, 1.5).log_prob(z).sum(1)

    const = 784 / 2 * math.log(2 * math.pi * 0.4**2) + 4 / 2 * math.log(2 * math.pi * 1.5**2)
    energy, grad = energy_grad(lambda z: model.posterior_energy(z, x), z)
    torch.testing.assert_close(energy, -log_joint(z) - const, rtol=1e-5, atol=1e-3)
    zz = z.clone().requires_grad_(True)
    (ref,) = torch.autograd.grad(log_joint(zz).sum(), zz)
    torch.testing.assert_close(grad, -ref, rtol=1e-4, atol=1e-4)


class Quadratic(nn.Module):
    def forward(self, x):
        return 0.5 * (x**2).flatten(1).sum(1)


def test_x_chain_noise_is_the_scripts_n_x():
    """The script adds n_x·ξ per step; ours adds s·τ·ξ with τ = n_x/s_x. On E = ‖x‖²/2 the
    chain x' = (1 − s²/2)x + n_x ξ has stationary variance n_x² / (1 − (1 − s²/2)²) exactly.
    N = 20000 draws: SE of the variance = var·√(2/N) ≈ 1% of it; tolerance 4 SE."""
    s, n_x = 0.5, 0.3
    model = tiny_model(x_step_size=s, x_noise=n_x)
    model.ebm = Quadratic()
    torch.manual_seed(2)
    x = model.revise_x(torch.zeros(20000, 1), steps=100)
    want = n_x**2 / (1 - (1 - s**2 / 2) ** 2)
    se = want * math.sqrt(2 / x.numel())
    assert abs(float(x.var()) - want) < 4 * se, (float(x.var()), want)
    assert model.temperature == pytest.approx((n_x / s) ** 2)


class LinearGenerator(nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = weight

    def forward(self, z):
        return z @ self.weight.T


def test_z_chain_samples_the_linear_gaussian_posterior():
    """With g(z) = Wz the posterior is Gaussian: precision A = WᵀW/σ² + I/σ_p², mean
    A⁻¹Wᵀx/σ². ULA keeps the exact mean; in A's eigenbasis its variance is
    s²τ² / (1 − (1 − s²λ/2)²) with τ = n_z/s_z. 4000 chains (16-dim observation, 4-dim z);
    tolerances 4 SE (mean: √(var/N); variance: var·√(2/N))."""
    torch.manual_seed(3)
    sigma, s, n_z = 0.5, 0.3, 0.2
    model = tiny_model(sigma=sigma, z_step_size=s, z_noise=n_z, gen_norm="none")
    weight = 0.3 * torch.randn(16, 4)
    model.generator = LinearGenerator(weight)
    x_obs = torch.randn(16)
    n = 4000
    x = x_obs.expand(n, 16)
    z = model.revise_z(torch.zeros(n, 4), x, steps=400)
    prec = weight.T @ weight / sigma**2 + torch.eye(4)
    mean = torch.linalg.solve(prec, weight.T @ x_obs / sigma**2)
    lam, vecs = torch.linalg.eigh(prec)
    var = n_z**2 / (1 - (1 - s**2 * lam / 2) ** 2)
    assert float(lam.max()) < 20  # well inside ULA's stability bound 4/s² ≈ 44
    proj = (z - mean) @ vecs
    assert (proj.mean(0).abs() < 4 * (var / n).sqrt()).all(), (proj.mean(0), var)
    assert ((proj.var(0) - var).abs() < 4 * var * math.sqrt(2 / n)).all(), (proj.var(0), var)


def test_one_step_updates_each_network_once_in_the_official_order():
    """generator → inference → ebm; each optimiser moves only its own network, and no loss
    leaks gradient into another network."""
    model = tiny_model()
    optimizers = model.build_optimizers(OPTIM)
    nets = {"generator": model.generator, "inference": model.inference, "ebm": model.ebm}
    owned = {k: {id(p) for g in o.param_groups for p in g["params"]} for k, o in optimizers.items()}
    for name, net in nets.items():
        assert owned[name] == {id(p) for p in net.parameters()}, name
    calls, grads = [], {}

    def snapshot():
        return {k: [p.detach().clone() for p in n.parameters()] for k, n in nets.items()}

    def wrap(name, opt):
        real = opt.step

        def step(*args, **kwargs):
            before = snapshot()
            grads[name] = {k: [None if p.grad is None else p.grad.clone() for p in n.parameters()]
                           for k, n in nets.items()}
            out = real(*args, **kwargs)
            after = snapshot()
            for k in nets:
                moved = any(not torch.equal(a, b) for a, b in zip(before[k], after[k], strict=True))
                assert moved == (k == name), (name, k)
            calls.append(name)
            return out
        opt.step = step

    for name, opt in optimizers.items():
        wrap(name, opt)
    x = torch.rand(8, 1, 28, 28) * 2 - 1
    metrics = model.training_step(x, 0, optimizers)
    assert calls == ["generator", "inference", "ebm"]
    # at the inference step the generator's gradients are still those of the generator loss,
    # and the EBM has none yet; at the EBM step neither earlier network got new gradient
    for earlier, later in (("generator", "inference"), ("generator", "ebm"),
                           ("inference", "ebm")):
        for a, b in zip(grads[earlier][earlier], grads[later][earlier],
                        strict=True):
            assert torch.equal(a, b), (earlier, later)
    assert all(g is None for g in grads["inference"]["ebm"])
    assert all(g is None for g in grads["generator"]["inference"])
    for key in ("loss", "energy_pos", "energy_neg", "energy_gap", "loss_generator",
                "loss_inference", "nll_posterior", "nll_latent"):
        assert math.isfinite(metrics[key]), key


def test_optimizers_take_model_level_lr_and_weight_decay():
    model = tiny_model(lr_generator=3e-4, weight_decay_ebm=0.0)
    opts = model.build_optimizers(OptimOptions(lr=1e-4, betas=(0.0, 0.9), weight_decay=5e-4))
    assert opts["generator"].param_groups[0]["lr"] == 3e-4
    assert opts["ebm"].param_groups[0]["lr"] == opts["inference"].param_groups[0]["lr"] == 1e-4
    assert opts["ebm"].param_groups[0]["weight_decay"] == 0.0
    assert opts["inference"].param_groups[0]["weight_decay"] == 5e-4
    assert opts["ebm"].param_groups[0]["betas"] == (0.0, 0.9)


def test_reconstruction_and_samples_have_the_data_shape():
    model = tiny_model().eval()
    x = torch.rand(3, 1, 28, 28) * 2 - 1
    assert model.reconstruct(x, chain=False).shape == x.shape
    assert model.reconstruct(x, chain=True).shape == x.shape
    assert model.sample(5).shape == (5, 1, 28, 28)
    assert model.sample_generator(5).shape == (5, 1, 28, 28)


def test_unsupported_data_is_refused_with_a_clear_message():
    cfg = tiny_config()
    with pytest.raises(ConfigError, match=r"shape \(3, 16, 16\) is not supported.*28×28×1"):
        DualMCMC.from_config(cfg.model, DataInfo(shape=(3, 16, 16), kind="image", low=-1.0,
                                                 high=1.0))
    with pytest.raises(ConfigError, match=r"needs real-valued images.*kind 'vector'"):
        DualMCMC.from_config(cfg.model, DataInfo(shape=(2,), kind="vector"))


@pytest.mark.parametrize("key,value,message", [
    ("x_step_size", 0, r"model.x_step_size: must be > 0; got 0"),
    ("z_noise", -0.1, r"model.z_noise: must be >= 0; got -0.1"),
    ("gen_norm", "layer", r"model.gen_norm: must be one of 'batch', 'none'; got 'layer'"),
    ("s_factr", 1.0, r"unknown key 'model.s_factr'. Did you mean model.s_factor\?"),
])
def test_bad_options_name_the_key(key, value, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(**{key: value})


def test_unknown_metric_names_the_available_ones():
    with pytest.raises(ConfigError, match=r"--metrics: kl_grid not available for model "
                       r"'dual_mcmc'; available: fd, mse"):
        choose_metrics("dual_mcmc", tiny_config(), IMAGE, ["kl_grid"])


def test_temperature_scales_the_ebm_gradient_by_one_over_t():
    """``temperature: true`` divides the EBM loss by T = (n_x/s_x)²; everything else equal, the
    EBM's gradient is exactly 1/T times the unscaled one (Adam then takes the same step)."""
    grads = {}
    for temp in (True, False):
        model = tiny_model(temperature=temp, x_noise=0.05, x_step_size=0.5)
        opts = model.build_optimizers(OPTIM)
        torch.manual_seed(4)
        model.training_step(torch.rand(8, 1, 28, 28) * 2 - 1, 0, opts)
        grads[temp] = torch.cat([p.grad.flatten() for p in model.ebm.parameters()])
    t = (0.05 / 0.5) ** 2
    torch.testing.assert_close(grads[True] * t, grads[False], rtol=1e-4, atol=1e-7)
