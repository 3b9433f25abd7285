"""LEBM (Pang et al. 2020): energies, chains and updates against closed forms and autograd."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from shortrun.data.base import DataInfo
from shortrun.errors import ConfigError
from shortrun.models.lebm import LEBM, frozen
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

MNIST_INFO = DataInfo((1, 28, 28), "image", -1.0, 1.0, 127.5, 127.5)
TINY = ["model.nz=4", "model.ngf=2", "model.ndf=8", "model.prior_steps=5", "model.post_steps=3"]


def make(*overrides: str, info: DataInfo = MNIST_INFO) -> LEBM:
    torch.manual_seed(0)
    cfg = resolve("lebm_mnist", [*TINY, *overrides])
    return build_model(cfg, info)


class LinearTilt(nn.Module):
    """``f(z) = a·z``: the tilted prior ``exp(a·z) N(0, σ_p²I)`` is ``N(σ_p² a, σ_p² I)``."""

    def __init__(self, a: torch.Tensor) -> None:
        super().__init__()
        self.lin = nn.Linear(a.numel(), 1, bias=False)
        with torch.no_grad():
            self.lin.weight.copy_(a[None])

    def forward(self, z):
        return self.lin(z).squeeze(-1)


def ula_gaussian_var(v: float, s: float) -> float:
    """Stationary variance of ULA ``z ← z − ½s² z/v + sξ`` on ``N(0, v)``:
    ``s² / (1 − (1 − s²/(2v))²) = v / (1 − s²/(4v))`` (exact for the discretised chain)."""
    return v / (1 - s * s / (4 * v))


def test_prior_chain_with_zero_tilt_samples_the_gaussian_reference():
    # f ≡ 0 → the prior energy is ‖z‖²/(2σ_p²) and the chain's law is the ULA Gaussian above.
    sp, s = 1.5, 0.5
    m = make(f"model.prior_sigma={sp}", f"model.prior_step_size={s}")
    with torch.no_grad():
        for p in m.tilt.parameters():
            p.zero_()
    g = torch.Generator().manual_seed(1)
    z = m.sample_prior(3000, steps=150, generator=g)  # (1 − s²/(2v))^300 ≈ e^-17: mixed
    n = z.numel()  # 12,000 independent coordinates
    var = ula_gaussian_var(sp**2, s)
    # 4 standard errors: SE(mean) = √(var/n), SE(var) = var·√(2/n).
    assert abs(float(z.mean())) < 4 * math.sqrt(var / n)
    assert abs(float(z.var()) - var) < 4 * var * math.sqrt(2 / n)


def test_prior_energy_sign_of_the_tilt_moves_the_mean_to_sigma_p_squared_times_a():
    # exp(+f) tilts towards a: ULA on a Gaussian keeps the exact mean σ_p² a.
    sp = 0.8
    m = make(f"model.prior_sigma={sp}", "model.prior_step_size=0.3")
    a = torch.tensor([1.0, -2.0, 0.5, 0.0])
    m.tilt = LinearTilt(a)
    z = m.sample_prior(4000, steps=200, generator=torch.Generator().manual_seed(2))
    var = ula_gaussian_var(sp**2, 0.3)
    se = math.sqrt(var / 4000)
    assert torch.allclose(z.mean(0), sp**2 * a, atol=4 * se)


def test_posterior_energy_gradient_is_minus_grad_log_joint():
    m = make("model.llhd_sigma=0.4", "model.prior_sigma=1.3")
    x = torch.rand(3, 1, 28, 28) * 2 - 1
    z = torch.randn(3, 4, dtype=torch.float64)
    m = m.double()
    x = x.double()

    def log_joint(z):
        lik = torch.distributions.Normal(m.generator(z), 0.4).log_prob(x).flatten(1).sum(1)
        ref = torch.distributions.Normal(torch.zeros_like(z), 1.3).log_prob(z).sum(1)
        return lik + m.tilt(z) + ref

    zz = z.clone().requires_grad_(True)
    (g_ref,) = torch.autograd.grad(log_joint(zz).sum(), zz)
    zz = z.clone().requires_grad_(True)
    (g_ours,) = torch.autograd.grad(m.posterior_energy(zz, x).sum(), zz)
    assert torch.allclose(g_ours, -g_ref, atol=1e-9)
    # and the energy is −log p(x, z) up to one constant (the same for every z and x).
    with torch.no_grad():
        diff = m.posterior_energy(z, x) + log_joint(z)
    assert torch.allclose(diff, diff[0].expand(3), atol=1e-8)


def test_one_posterior_step_equals_the_official_two_gradient_update():
    # Official: z − ½s²(∇_z ‖x−g(z)‖²/(2σ²) + ∇_z en(z) + z/σ_p²) + sξ, with en = −f here.
    s, sig, sp = 0.1, 0.3, 1.0
    m = make("model.post_steps=1", f"model.post_step_size={s}")
    x = torch.rand(5, 1, 28, 28) * 2 - 1
    g = torch.Generator().manual_seed(3)
    ours = m.sample_posterior(x, generator=g)
    g = torch.Generator().manual_seed(3)
    z = torch.randn(5, 4, generator=g).requires_grad_(True)
    rec = ((m.generator(z) - x) ** 2).sum() / (2 * sig**2)
    (gz_rec,) = torch.autograd.grad(rec, z)
    (gz_e,) = torch.autograd.grad((-m.tilt(z)).sum(), z)
    ref = z - 0.5 * s**2 * (gz_rec + gz_e + z / sp**2) + s * torch.randn(5, 4, generator=g)
    assert torch.allclose(ours, ref.detach(), atol=1e-5)


def test_chains_do_no_parameter_gradient_work_and_restore_flags():
    m = make()
    x = torch.rand(4, 1, 28, 28) * 2 - 1
    m.sample_posterior(x)
    m.sample_prior(4)
    assert all(p.grad is None for p in m.parameters())
    assert all(p.requires_grad for p in m.parameters())
    with frozen(m):
        assert not any(p.requires_grad for p in m.parameters())


def test_training_step_updates_match_hand_derived_gradients(monkeypatch):
    # With the chains' outputs pinned, the generator gradient is ∇β Σ‖x − g(z⁺)‖²/B and the
    # tilt gradient for f(z) = a·z is ∇a [mean(−a·z⁺) − mean(−a·z⁻)] = mean z⁻ − mean z⁺.
    m = make("train.grad_clip=null")
    m.tilt = LinearTilt(torch.zeros(4))
    opts = m.build_optimizers()
    x = torch.rand(6, 1, 28, 28) * 2 - 1
    z_pos, z_neg = torch.randn(6, 4), torch.randn(6, 4) + 1.0
    monkeypatch.setattr(m, "sample_posterior", lambda x, *a, **k: z_pos)
    monkeypatch.setattr(m, "sample_prior", lambda n, *a, **k: z_neg)
    twin = copy.deepcopy(m.generator)
    grads = torch.autograd.grad(((x - twin(z_pos)) ** 2).flatten(1).sum(1).mean(),
                                list(twin.parameters()))
    metrics = m.training_step(x, 0, opts)
    for p, g in zip(m.generator.parameters(), grads, strict=True):
        assert torch.allclose(p.grad, g, rtol=1e-5, atol=1e-6)
    expected = z_neg.mean(0) - z_pos.mean(0)
    assert torch.allclose(m.tilt.lin.weight.grad[0], expected, atol=1e-6)
    assert set(metrics) >= {"loss", "loss_prior", "energy_pos", "energy_neg", "energy_gap"}
    assert metrics["energy_gap"] == pytest.approx(metrics["energy_neg"] - metrics["energy_pos"])


def test_gaussian_prior_ablation_has_no_ebm_and_samples_exactly():
    m = make("model.prior=gaussian", "model.prior_sigma=2.0")
    assert m.tilt is None
    assert set(m.build_optimizers()) == {"generator"}
    z = m.sample_prior(20000, generator=torch.Generator().manual_seed(4))
    n = z.numel()
    assert abs(float(z.var()) - 4.0) < 4 * 4.0 * math.sqrt(2 / n)
    x = torch.rand(4, 1, 28, 28) * 2 - 1
    metrics = m.training_step(x, 0, m.build_optimizers())
    assert "loss_prior" not in metrics and math.isfinite(metrics["energy_pos"])


@pytest.mark.parametrize("info,kind", [
    (DataInfo((1, 28, 28), "image", -1, 1), "mnist28"),
    (DataInfo((3, 32, 32), "image", -1, 1), "svhn32"),
    (DataInfo((3, 64, 64), "image", -1, 1), "celeba64"),
])
def test_generators_make_images_of_the_data_shape_in_range(info, kind):
    m = make("model.generator=auto", info=info)
    assert m.generator.kind == kind
    x = m.sample(3, steps=2)
    assert x.shape == (3, *info.shape) and float(x.abs().max()) <= 1.0


def test_svhn_generator_is_the_official_architecture():
    cfg = resolve("lebm_svhn")
    m = build_model(cfg, DataInfo((3, 32, 32), "image", -1, 1))
    convs = [mod for mod in m.generator.modules() if isinstance(mod, nn.ConvTranspose2d)]
    assert [(c.in_channels, c.out_channels) for c in convs] == [
        (100, 512), (512, 256), (256, 128), (128, 3)]
    assert not any(isinstance(mod, nn.BatchNorm2d) for mod in m.modules())
    lins = [mod for mod in m.tilt.modules() if isinstance(mod, nn.Linear)]
    assert [(ln.in_features, ln.out_features) for ln in lins] == [(100, 200), (200, 200), (200, 1)]


def test_svhn_recipe_carries_every_official_default():
    c = resolve("lebm_svhn")
    m, t = c.model, c.train
    got = (m.nz, m.ndf, m.ngf, m.prior_steps, m.prior_step_size, m.post_steps,
           m.post_step_size, m.llhd_sigma, m.prior_sigma, m.lr_prior, t.lr, t.batch_size,
           t.betas, t.lr_decay, m.prior_act)
    assert got == (100, 200, 64, 60, 0.4, 20, 0.1, 0.3, 1.0, 2e-5, 1e-4, 100, (0.5, 0.999),
                   0.998, "gelu")
    assert resolve("lebm_mnist_anomaly").data.anomaly_digit == 1
    assert resolve("lebm_mnist_anomaly").data.anomaly_split == "pooled"  # as described


def test_energy_trace_logs_the_long_run_chain():
    m = make()
    tr = m.energy_trace(8, steps=30, every=10)
    assert tr["step"] == [0, 10, 20, 29]
    assert len(tr["energy"]) == 4 and all(math.isfinite(e) for e in tr["energy"])


def test_reconstruct_and_anomaly_score_shapes():
    m = make()
    x = torch.rand(5, 1, 28, 28) * 2 - 1
    assert m.reconstruct(x).shape == x.shape
    s = m.anomaly_score(x)
    assert s.shape == (5,) and torch.isfinite(s).all()


@pytest.mark.parametrize("override,message", [
    ("model.prior=flow", "model.prior: must be one of 'ebm', 'gaussian'"),
    ("model.post_step_size=0", "model.post_step_size: must be > 0"),
    ("model.prior_steps=-1", "model.prior_steps: must be > 0"),
    ("model.llhd_sigma=nope", "model.llhd_sigma: expected a number"),
])
def test_bad_options_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        resolve("lebm_mnist", [override])


def test_generator_that_does_not_fit_the_data_is_refused():
    with pytest.raises(ConfigError, match=r"model.generator: 'svhn32' makes images of shape"):
        make("model.generator=svhn32")
    with pytest.raises(ConfigError, match="no LEBM generator for data of shape"):
        make("model.generator=auto", info=DataInfo((3, 48, 48), "image", -1, 1))


def test_auprc_without_a_held_out_digit_is_refused():
    from shortrun.data.base import LoadedData
    from shortrun.evaluation import evaluate

    cfg = resolve("lebm_mnist", TINY)
    m = make()
    x = torch.zeros(4, 1, 28, 28)
    data = LoadedData(train=x, test=x, info=MNIST_INFO, test_labels=torch.zeros(4).long())
    with pytest.raises(ConfigError, match="needs a model trained with data.anomaly_digit"):
        evaluate(cfg, m, ["auprc"], data=data)


def test_anomaly_score_is_minus_log_joint_or_the_tilt_alone():
    m = make()
    x = torch.rand(5, 1, 28, 28) * 2 - 1
    z = m.sample_posterior(x, generator=torch.Generator().manual_seed(7))
    joint = m.anomaly_score(x, generator=torch.Generator().manual_seed(7))
    assert torch.allclose(joint, m.posterior_energy(z, x).detach(), atol=1e-4)
    m.options.anomaly_score = "tilt"
    tilt = m.anomaly_score(x, generator=torch.Generator().manual_seed(7))
    assert torch.allclose(tilt, -m.tilt(z).detach(), atol=1e-5)
