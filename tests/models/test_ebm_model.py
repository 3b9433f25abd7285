"""Data-space EBM and score-matching models: energies, chains, checkpointed state, config
errors, evaluation keys and pictures. Tiny sizes: these check wiring, not sample quality
(quality is measured in bench/ebm_kl_table.py)."""

from __future__ import annotations

import pytest
import torch

from shortrun.energies import AtSigma, ConvEnergy, MLPEnergy, NoiseConditionalEnergy
from shortrun.errors import ConfigError
from shortrun.evaluation import evaluate
from shortrun.evaluation.registry import choose_metrics
from shortrun.samplers.langevin import energy_grad, langevin
from shortrun.train.config import resolve
from shortrun.train.trainer import Trainer

TINY_SCORE = ["data.n_train=1000", "data.n_test=200", "train.steps=6", "train.batch_size=64",
              "train.log_every=3", "train.ckpt_every=3", "train.sample_every=1000",
              "train.progress=false", "model.hidden=16", "model.langevin_steps=10",
              "sample.n=32", "eval.n_samples=64"]


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_mlp_fast_input_gradient_equals_autograd(depth):
    torch.manual_seed(0)
    energy = MLPEnergy(3, 8, depth).double()
    x = torch.randn(7, 3, dtype=torch.float64)
    e_fast, g_fast = energy.energy_and_grad(x)
    e_auto, g_auto = energy_grad(lambda z: energy(z), x)
    assert torch.allclose(e_fast, e_auto.detach()) and torch.allclose(g_fast, g_auto)
    assert MLPEnergy(3, 8, depth, act="tanh").energy_and_grad(x.float()) is None


def test_langevin_gives_the_same_chain_with_and_without_the_fast_gradient():
    torch.manual_seed(1)
    energy = MLPEnergy(2, 16, 2).double()
    x0 = torch.randn(50, 2, dtype=torch.float64)
    a, _ = langevin(energy, x0, 20, 0.1, generator=torch.Generator().manual_seed(2))
    b, _ = langevin(lambda z: energy(z), x0, 20, 0.1, generator=torch.Generator().manual_seed(2))
    assert torch.allclose(a, b)


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32)])
def test_conv_energy_maps_images_to_one_energy_each(shape):
    for kwargs in ({}, {"spectral_norm": True, "residual": False, "act": "lrelu"}):
        energy = ConvEnergy(shape[0], nf=4, **kwargs)
        out = energy(torch.randn(3, *shape))
        assert out.shape == (3,) and torch.isfinite(out).all()


def test_noise_conditional_energy_scales_as_one_over_sigma():
    torch.manual_seed(3)
    energy = NoiseConditionalEnergy(2, 8, 2)
    x = torch.randn(5, 2)
    per_example = energy(x, torch.full((5,), 0.5))
    assert torch.allclose(per_example, energy(x, 0.5))
    assert torch.allclose(AtSigma(energy, 0.5)(x), per_example)


@pytest.mark.parametrize("chain", ["buffer", "persistent", "noise", "data"])
def test_ebm_trains_with_every_chain_source_and_checkpoints_its_state(tmp_path, chain,
                                                                      tiny_ebm_overrides):
    cfg = resolve("ebm_25gaussians", [*tiny_ebm_overrides, f"model.chain={chain}",
                                      "model.n_chains=128", "model.jumps=2",
                                      "train.grad_clip=1.0", "model.energy_reg=0.1",
                                      "model.drift_clamp=0.05"])
    result = Trainer(cfg, tmp_path / chain).fit()
    assert {"loss", "energy_pos", "energy_neg", "energy_gap", "grad_norm",
            "jump_accept"} <= set(result.metrics)
    state = torch.load(tmp_path / chain / "checkpoints" / "last.pt", weights_only=True)["model"]
    key = {"buffer": "source.store", "persistent": "source.chains"}.get(chain)
    if key:
        assert key in state and bool(state[key].abs().sum() > 0)
    assert (tmp_path / chain / "samples").is_dir()


def test_ebm_eval_reports_kl_mmd_and_draws_the_density(tmp_path, tiny_ebm_overrides):
    from shortrun.data.registry import load_data

    cfg = resolve("ebm_25gaussians", [*tiny_ebm_overrides, "eval.n_samples=100"])
    trainer = Trainer(cfg, tmp_path / "run")
    trainer.fit()
    model = trainer.model.eval()
    metrics = choose_metrics(model.name, cfg, model.info, [])
    assert metrics == ["kl_grid", "loglik_grid", "mmd"]
    out = evaluate(cfg, model, metrics, data=load_data(cfg.data), run_dir=tmp_path / "run")
    assert out["kl_grid"] > 0 and out["mmd_n"] == 100 and "loglik_grid" in out
    assert (tmp_path / "run" / "density.png").stat().st_size > 1000


def test_default_metrics_drop_kl_grid_where_there_is_no_closed_form(tiny_ebm_overrides):
    from shortrun.data.base import DataInfo
    from shortrun.models.registry import build_model

    cfg = resolve("ebm_rings", tiny_ebm_overrides)
    model = build_model(cfg, DataInfo(shape=(2,), kind="vector"))
    assert choose_metrics(model.name, cfg, model.info, []) == ["loglik_grid", "mmd"]
    with pytest.raises(ConfigError, match="fd not available for 2-D data; use kl_grid"):
        choose_metrics(model.name, cfg, model.info, ["fd"])


@pytest.mark.parametrize("recipe, extra", [
    ("dsm_25gaussians", []),
    ("dsm_25gaussians", ["model.n_sigmas=4", "model.conditional=true"]),
    ("dsm_25gaussians", ["model.n_sigmas=4"]),
    ("ssm_25gaussians", ["model.variance_reduced=false", "model.projection=gaussian"]),
    ("ssm_25gaussians", ["model.name=sm"]),
])
def test_score_models_train_sample_and_evaluate(tmp_path, recipe, extra):
    from shortrun.data.registry import load_data

    cfg = resolve(recipe, [*TINY_SCORE, *extra])
    trainer = Trainer(cfg, tmp_path / "run")
    result = trainer.fit()
    assert {"loss", "energy_data"} <= set(result.metrics)
    model = trainer.model.eval()
    x = model.sample(16)
    assert x.shape == (16, 2) and torch.isfinite(x).all()
    out = evaluate(cfg, model, ["kl_grid", "mmd"], data=load_data(cfg.data))
    assert out["kl_grid"] > 0 and abs(out["mmd"]) < 10


def test_pool_size_and_its_old_name_n_chains():
    """The ebm's pool of persistent chains is ``model.pool_size``; ``model.n_chains``, its old
    key, still sets it, and the resolved config names the pool once."""
    old = resolve("ebm_25gaussians", ["model.chain=persistent", "model.n_chains=300"])
    new = resolve("ebm_25gaussians", ["model.chain=persistent", "model.pool_size=300"])
    assert old.model.pool_size == new.model.pool_size == 300
    assert old.model.n_chains is None and old.model == new.model
    assert resolve("ebm_25gaussians").model.pool_size == 1000


@pytest.mark.parametrize("recipe, sets, message", [
    ("ebm_25gaussians", ["model.chain=persistent", "model.n_chains=10"],
     r"model.pool_size=10 \(old name model.n_chains\) is smaller than train.batch_size"),
    ("ebm_25gaussians", ["model.chain=persistent", "model.pool_size=10"],
     r"model.pool_size=10 \(old name model.n_chains\) is smaller than train.batch_size"),
    ("ebm_25gaussians", ["model.pool_size=64", "model.n_chains=128"],
     "model.pool_size=64 and model.n_chains=128 \\(its old name\\) disagree"),
    ("ebm_25gaussians", ["model.energy=conv"], "model.energy=conv needs image data"),
    ("ebm_25gaussians", ["model.jumps=-1"], "model.jumps: must be >= 0"),
    ("ssm_25gaussians", ["model.conditional=true"], "model.conditional: a noise-conditional"),
    ("dsm_25gaussians", ["model.n_sigmas=4", "model.sigma_min=3.0"],
     "model.sigma_min=3.0 must be below"),
    ("dsm_25gaussians", ["model.conditional=true"], "model.conditional: a noise-conditional"),
    ("dsm_25gaussians", ["model.projection=uniform"], "model.projection: must be one of"),
])
def test_bad_model_options_name_the_key(tmp_path, recipe, sets, message):
    with pytest.raises(ConfigError, match=message):
        cfg = resolve(recipe, [*TINY_SCORE, *sets])
        Trainer(cfg, tmp_path / "run")


def test_ebm_mnist_recipe_builds_a_conv_energy_and_steps(tmp_path, data_dir):
    cfg = resolve("ebm_mnist", ["data.n_train=128", "train.steps=2", "train.batch_size=16",
                                "model.nf=4", "model.buffer_size=64", "model.langevin_steps=2",
                                "train.progress=false", "train.sample_every=1000",
                                "sample.n=4", "sample.steps=2"])
    result = Trainer(cfg, tmp_path / "run").fit()
    assert torch.isfinite(torch.tensor(result.metrics["loss"]))
