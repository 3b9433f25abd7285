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
from shortrun.models.damc import DAMC, DAMCOptions, build_amortizer
from shortrun.models.latent_chains import ShortRunChains
from shortrun.models.lebm import LEBM
from shortrun.models.lebm_nets import PriorTilt
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


TINY_DAMC = ["data.n_train=100", "train.batch_size=50", "train.progress=false",
             "train.ckpt_every=1", "train.sample_every=100", "model.nz=4", "model.ngf=2",
             "model.ndf=8", "model.prior_steps=3", "model.post_steps=2",
             "model.eval_post_steps=1", "model.damc_width=8", "model.damc_emb=8",
             "model.damc_time_emb=8", "model.damc_encoder_width=2", "model.damc_steps=3",
             "model.damc_updates=2", "model.damc_ema_every=1", "train.lr_decay=0.5"]


def test_resume_restores_amortizer_its_slow_copy_and_optimiser_bit_for_bit(
        tmp_path, data_dir, monkeypatch):
    from shortrun.train.checkpoint import load_checkpoint
    from shortrun.train.rundir import read_config
    from shortrun.train.trainer import Trainer

    monkeypatch.setenv("SHORTRUN_DATA", str(data_dir))
    Trainer(resolve("damc_mnist", [*TINY_DAMC, "train.steps=4"]), tmp_path / "a").fit()
    Trainer(resolve("damc_mnist", [*TINY_DAMC, "train.steps=2"]), tmp_path / "b").fit()
    Trainer(read_config(tmp_path / "b", ["train.steps=4"]), tmp_path / "b", resume=True).fit()
    a, b = (load_checkpoint(tmp_path / r / "checkpoints" / "last.pt") for r in "ab")
    assert any(k.startswith("chains.target.") for k in a["model"])
    assert a["model"].keys() == b["model"].keys()
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert set(b["optimizers"]) == {"generator", "prior", "amortizer"}
    # the amortizer's AdamW runs at train.lr (lr_amortizer unset) under the same lr schedule
    group = b["optimizers"]["amortizer"]["param_groups"][0]
    assert group["lr"] == pytest.approx(3e-4 * 0.25) and group["weight_decay"] == 1e-4
    for key in ("exp_avg", "exp_avg_sq"):
        for i, state in a["optimizers"]["amortizer"]["state"].items():
            assert torch.equal(state[key], b["optimizers"]["amortizer"]["state"][i][key])


def test_default_prior_sampler_builds_no_amortizer():
    cfg = resolve("lebm_mnist", ["model.nz=4", "model.ngf=2", "model.ndf=8"])
    m = build_model(cfg, DataInfo((1, 28, 28), "image", -1.0, 1.0, 127.5, 127.5))
    assert cfg.model.prior_sampler == "langevin" and m.damc is None
    assert type(m.chains) is ShortRunChains and not list(m.chains.state_dict())
    assert set(m.build_optimizers()) == {"generator", "prior"}


def test_python_api_prior_sampler_damc_fits_on_a_users_array():
    import shortrun

    torch.manual_seed(0)
    x = torch.randn(200, 2) @ torch.randn(2, 6)
    gen = nn.Sequential(nn.Linear(3, 16), nn.GELU(), nn.Linear(16, 6))
    model = shortrun.LEBM(gen, shortrun.PriorTilt(3, 8), nz=3, prior_steps=4, post_steps=3,
                          prior_sampler="damc", **SMALL)
    assert model.damc is None  # built when the data's shape is known
    shortrun.fit(model, x, steps=3, batch_size=50, progress=False)
    assert model.damc is not None and model.sample(5).shape == (5, 6)
    assert model.reconstruct(x[:4]).shape == (4, 6)


def test_lr_amortizer_and_weight_decay_fall_back_to_train_options():
    from shortrun.models.base import OptimOptions

    m = linear_gaussian_lebm()
    opt = m.build_optimizers(OptimOptions(lr=7e-4, weight_decay=0.01))["amortizer"]
    assert isinstance(opt, torch.optim.AdamW)
    assert opt.param_groups[0]["lr"] == 7e-4 and opt.param_groups[0]["weight_decay"] == 0.01
    m = linear_gaussian_lebm(lr_amortizer=1e-5, weight_decay_amortizer=0.0)
    opts = m.build_optimizers(OptimOptions(lr=7e-4, weight_decay=0.01))
    group = opts["amortizer"].param_groups[0]
    assert group["lr"] == 1e-5 and group["weight_decay"] == 0.0


def test_slow_copy_moves_by_the_ema_rate_every_n_iterations():
    m = linear_gaussian_lebm(damc_ema=0.25, damc_ema_every=2, damc_updates=1)
    opts = m.build_optimizers()
    slow = [p.clone() for p in m.damc.target.parameters()]
    x = torch.randn(8, 3)
    m.training_step(x, 0, opts)  # (0 + 1) % 2 != 0: the slow copy waits
    assert all(torch.equal(a, b) for a, b in zip(slow, m.damc.target.parameters(), strict=True))
    m.training_step(x, 1, opts)
    for before, after, fast in zip(slow, m.damc.target.parameters(),
                                   m.damc.amortizer.parameters(), strict=True):
        assert torch.allclose(after, 0.75 * before + 0.25 * fast, atol=1e-6)
    assert not any(p.requires_grad for p in m.damc.target.parameters())


def test_amortizer_learns_from_the_posterior_chain_outputs(monkeypatch):
    # The amortizer's targets are z⁺, the posterior chain's end states, conditioned on their x.
    m = linear_gaussian_lebm(damc_updates=1)
    opts = m.build_optimizers()
    x, z_pos = torch.randn(8, 3), torch.randn(8, 2) + 3.0
    monkeypatch.setattr(m, "sample_posterior", lambda *a, **k: z_pos)
    seen = {}

    def spy(z, xx, mask_prob=0.0, generator=None):
        seen.update(z=z, x=xx, mask_prob=mask_prob)
        return torch.zeros(len(z), requires_grad=True)

    monkeypatch.setattr(m.damc.amortizer, "loss", spy)
    m.training_step(x, 0, opts)
    assert torch.equal(seen["z"], z_pos) and torch.equal(seen["x"], x)
    assert seen["mask_prob"] == m.options.damc_mask_prob


def test_damc_without_its_optimiser_is_refused_with_the_fix():
    m = linear_gaussian_lebm()
    with pytest.raises(ConfigError, match="bind it \\(info=...\\) before build_optimizers"):
        m.training_step(torch.randn(4, 3), 0, {"generator": None})


def test_unknown_prior_sampler_names_the_key():
    with pytest.raises(ConfigError, match="prior_sampler"):
        resolve("lebm_mnist", ["model.prior_sampler=mcmc"])


def test_text_model_amortizer_encodes_token_ids_and_trains():
    text = DataInfo((8,), "text", 0.0, 11.0)
    torch.manual_seed(0)
    cfg = resolve("lebm_ptb_small", ["model.nz=4", "model.emb=6", "model.hidden=8",
                                     "model.ndf=8", "model.prior_steps=3", "model.post_steps=2",
                                     "model.prior_sampler=damc", "model.damc_width=8",
                                     "model.damc_emb=8", "model.damc_time_emb=8",
                                     "model.damc_encoder_width=2", "model.damc_steps=3"])
    m = build_model(cfg, text)
    batch = torch.tensor([[1, 5, 7, 3, 2, 0, 0, 0], [1, 4, 2, 0, 0, 0, 0, 0]])
    before = [p.clone() for p in m.damc.amortizer.parameters()]
    metrics = m.training_step(batch, 0, m.build_optimizers())
    assert math.isfinite(metrics["loss_amortizer"]) and math.isfinite(metrics["ppl_post"])
    assert any(not torch.equal(a, b) for a, b in zip(before, m.damc.amortizer.parameters(),
                                                     strict=True))
    assert m.sample(3).shape == (3, 8)


def test_damc_mnist_short_is_damc_mnist_with_the_measured_overrides():
    """docs/damc.md's equal-budget runs were ``damc_mnist`` with these three overrides
    (bench/damc_compare.py --damc-set); the shipped recipe must be exactly that run."""
    short = resolve("damc_mnist_short")
    measured = resolve("damc_mnist", ["model.post_steps=10", "model.damc_noise_chains=false",
                                      "train.steps=1850"])
    assert short.model == measured.model and short.train == measured.train
    assert short.data == measured.data and short.eval == measured.eval
    assert (short.model.post_steps, short.model.damc_noise_chains) == (10, False)


def test_injected_source_computes_what_the_recipe_keys_compute():
    """``LEBM(gen, prior, chains=DAMC(amortizer, DAMCOptions(...)))`` is the model the
    ``prior_sampler: damc`` keys build: the same parameters after the same two iterations."""
    def model(injected: bool) -> LEBM:
        torch.manual_seed(0)
        gen, tilt = nn.Linear(2, 3), PriorTilt(2, 8)
        keys = dict(nz=2, prior_steps=3, post_steps=2)
        if not injected:
            return LEBM(gen, tilt, info=VECTOR, prior_sampler="damc", damc_updates=2,
                        damc_ema_every=1, **keys, **SMALL)
        amortizer = build_amortizer(2, (3,), "vector", width=16, emb=16, time_emb=16,
                                    encoder_width=4, steps=10)
        return LEBM(gen, tilt, info=VECTOR, chains=DAMC(amortizer, DAMCOptions(
            updates=2, ema_every=1)), **keys)

    states = []
    for injected in (False, True):
        m = model(injected)
        assert m.chains.options == DAMCOptions(updates=2, ema_every=1)
        opts = m.build_optimizers()
        assert set(opts) == {"generator", "prior", "amortizer"}
        torch.manual_seed(1)
        for step in range(2):
            m.training_step(torch.randn(4, 3), step, opts)
        states.append(m.state_dict())
    assert states[0].keys() == states[1].keys()
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_checkpoint_with_the_earlier_damc_keys_loads():
    m = linear_gaussian_lebm()
    old = {k.replace("chains.", "damc.", 1): v.clone() + 1 for k, v in m.state_dict().items()}
    assert any(k.startswith("damc.amortizer.") for k in old)
    m.load_state_dict(old)
    assert all(torch.equal(m.state_dict()[k.replace("damc.", "chains.", 1)], v)
               for k, v in old.items())


def test_damc_options_out_of_bounds_are_refused_with_the_field_named():
    with pytest.raises(ConfigError, match="DAMCOptions.mask_prob: must be <= 1"):
        DAMCOptions(mask_prob=1.5)
    with pytest.raises(ConfigError, match="DAMCOptions.uncond: must be one of"):
        DAMCOptions(uncond="never")
