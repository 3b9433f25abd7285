"""Dual-MCMC teaching (Cui & Han 2023) by value. With both chains pinned (the revised latents
``z̃`` and samples ``x̃`` fixed tensors), each network's gradient is compared with autograd of
the paper's loss written out here on a copy of the network:

- generator (Eq. 10): ``G·mean ‖x − g(z̃)‖² + S·mean ‖x̃ − g(z)‖²``;
- inference net (Eq. 15): ``−G·mean log q(z̃|x) − I·mean log q(z|x̃)``, ``q`` a diagonal Gaussian
  (``torch.distributions.Normal``);
- EBM (Eq. 7): ``mean E(x) − mean E(x̃)``: ``mean ∇E(x⁺) − mean ∇E(x⁻)``.

And the two eval metrics behind bench/README's Dual-MCMC effects on inputs with a known
answer: ``fd_revised`` is the Fréchet distance of the *revised* samples, ``mse_chain`` the
per-pixel MSE *after* the z-chain."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from shortrun.data.base import DataInfo, LoadedData
from shortrun.evaluation import evaluate
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

IMAGE = DataInfo((1, 28, 28), "image", -1.0, 1.0, 127.5, 127.5)
NZ, B = 4, 6
TINY = [f"model.nz={NZ}", "model.ebm_channels=4", "model.gen_channels=8", "model.inf_channels=4",
        "model.gen_norm=none", "model.spectral_norm=false", "model.x_steps=2",
        "model.z_steps=2", "model.g_factor=1.5", "model.s_factor=2.5", "model.i_factor=0.7",
        "train.grad_clip=null"]


def make(*overrides: str):
    torch.manual_seed(0)
    cfg = resolve("dual_mcmc_fashion", [*TINY, *overrides])
    model = build_model(cfg, IMAGE)
    model.run_cfg = cfg  # the run config evaluation reads (eval.n_samples, eval.batch_size)
    return model


def run_eval(model, metrics, data, run_dir):
    return evaluate(model.run_cfg, model, metrics, data=data, run_dir=run_dir)


def options(model):
    """The model's own options, before and after the redesign (``cfg.model`` → ``options``)."""
    return getattr(model, "options", None) or model.cfg.model


def normal_nll(z, mean, logvar):
    return -torch.distributions.Normal(mean, torch.exp(0.5 * logvar)).log_prob(z).sum(1)


def sq_sum(a, b):
    return ((a - b) ** 2).flatten(1).sum(1)


@pytest.mark.parametrize("resample_x", [False, True])
def test_each_network_follows_its_papers_loss(monkeypatch, resample_x):
    model = make(f"model.resample_x={str(resample_x).lower()}", "model.temperature=false")
    g = torch.Generator().manual_seed(1)
    x = torch.rand(B, 1, 28, 28, generator=g) * 2 - 1
    z_rev = torch.randn(B, NZ, generator=g)
    x_rev = torch.rand(B, 1, 28, 28, generator=g) * 2 - 1
    monkeypatch.setattr(model, "revise_z", lambda z0, x, *a, **k: z_rev.clone())
    monkeypatch.setattr(model, "revise_x", lambda x0, *a, **k: x_rev.clone())
    gen, inf, ebm = (copy.deepcopy(n) for n in (model.generator, model.inference, model.ebm))
    torch.manual_seed(5)
    z = torch.randn(B, NZ)  # the step's first draw: the generator's latents
    o = options(model)
    want_g = torch.autograd.grad(
        o.g_factor * sq_sum(x, gen(z_rev)).mean() + o.s_factor * sq_sum(x_rev, gen(z)).mean(),
        list(gen.parameters()))
    want_i = torch.autograd.grad(
        o.g_factor * normal_nll(z_rev, *inf(x)).mean()
        + o.i_factor * normal_nll(z, *inf(x_rev)).mean(), list(inf.parameters()))
    want_e = torch.autograd.grad(ebm(x).mean() - ebm(x_rev).mean(), list(ebm.parameters()))

    opts = {k: torch.optim.SGD(n.parameters(), lr=0.0) for k, n in
            (("generator", model.generator), ("inference", model.inference), ("ebm", model.ebm))}
    torch.manual_seed(5)
    model.training_step(x, 0, opts)
    for net, want in ((model.generator, want_g), (model.inference, want_i),
                      (model.ebm, want_e)):
        for p, w in zip(net.parameters(), want, strict=True):
            torch.testing.assert_close(p.grad, w, rtol=1e-4, atol=1e-6)


class LinearGenerator(nn.Module):
    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight)

    def forward(self, z):
        return (z @ self.weight.T).view(-1, *IMAGE.shape)


class FixedEncoder(nn.Module):
    """``q(z|x) = N(m, I)`` for every x."""

    def __init__(self, mean: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("m", mean)

    def forward(self, x):
        return self.m.expand(x.shape[0], -1), torch.zeros(x.shape[0], self.m.numel())


def data_of(test: torch.Tensor) -> LoadedData:
    return LoadedData(train=test, test=test, info=IMAGE)


def test_mse_chain_is_the_per_pixel_error_after_the_z_chain(monkeypatch, tmp_path):
    """g(z) = Wz, μ_φ ≡ m and a z-chain that moves every latent by +1: mse_inference is
    mean (Wm − x)², mse_chain is mean (W(m + 1) − x)², both per pixel."""
    model = make("eval.n_samples=5", "eval.batch_size=3")
    g = torch.Generator().manual_seed(2)
    weight = 0.1 * torch.randn(784, NZ, generator=g)
    m = torch.randn(NZ, generator=g)
    model.generator = LinearGenerator(weight)
    model.inference = FixedEncoder(m)
    monkeypatch.setattr(model, "revise_z", lambda z0, x, *a, **k: z0 + 1.0)
    test = torch.rand(7, 1, 28, 28, generator=g) * 2 - 1
    out = run_eval(model, ["mse"], data_of(test), tmp_path)
    x = test[:5].flatten(1)
    want_inf = float(((m @ weight.T - x) ** 2).mean())
    want_chain = float((((m + 1.0) @ weight.T - x) ** 2).mean())
    assert abs(want_chain - want_inf) > 0.01  # the chain matters on these inputs
    assert out["mse_inference"] == pytest.approx(want_inf, rel=1e-5)
    assert out["mse_chain"] == pytest.approx(want_chain, rel=1e-5)


def frechet_1d(a: torch.Tensor, b: torch.Tensor) -> float:
    """FD of 1-D features: (μa − μb)² + σa² + σb² − 2σaσb (unbiased variances)."""
    va, vb = float(a.var()), float(b.var())
    return float((a.mean() - b.mean()) ** 2) + va + vb - 2 * (va * vb) ** 0.5


def test_fd_revised_is_the_frechet_distance_of_the_revised_samples(monkeypatch, tmp_path):
    """A feature map that is each image's mean pixel, generator samples with known pixel
    means, and an x-chain that adds 0.3 to every pixel: both FDs have a closed form, and they
    differ because revision moves the samples."""
    import shortrun.evaluation.features as features
    from shortrun.metrics.features import Extractor

    model = make("eval.n_samples=40", "eval.batch_size=16")
    g = torch.Generator().manual_seed(3)
    generated = torch.rand(40, 1, 28, 28, generator=g) * 1.2 - 0.9
    reference = torch.rand(50, 1, 28, 28, generator=g) * 1.4 - 0.6
    taken = iter(generated.split(16))
    monkeypatch.setattr(model, "sample_generator", lambda n, *a, **k: next(taken))
    monkeypatch.setattr(model, "revise_x", lambda x0, *a, **k: x0 + 0.3)
    extractor = Extractor("pixel_mean", lambda x: x.flatten(1).mean(1, keepdim=True),
                                   1, IMAGE)
    monkeypatch.setattr(features, "load_extractor", lambda *a, **k: extractor)
    out = run_eval(model, ["fd"], data_of(reference), tmp_path)
    mean_gen, mean_ref = generated.flatten(1).mean(1), reference.flatten(1).mean(1)
    assert out["fd_generator"] == pytest.approx(frechet_1d(mean_gen, mean_ref), rel=1e-6)
    assert out["fd_revised"] == pytest.approx(frechet_1d(mean_gen + 0.3, mean_ref), rel=1e-6)
    assert abs(out["fd_revised"] - out["fd_generator"]) > 0.01
