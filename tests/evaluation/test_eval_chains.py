"""The ``chains`` metric: long chains from every MCMC model family, the eval.json keys they give,
how the per-kind numbers are combined, and the files written beside them."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from shortrun.data.base import DataInfo, LoadedData
from shortrun.errors import ConfigError
from shortrun.evaluation import evaluate
from shortrun.evaluation.chains import (
    ChainKind,
    chain_results,
    diagnose,
    draw_chains,
    table,
)
from shortrun.evaluation.registry import eval_spec
from shortrun.metrics.chains import summarize
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

MNIST = DataInfo((1, 28, 28), "image", -1.0, 1.0, 127.5, 127.5)
DIGITS_BINARY = DataInfo((1, 8, 8), "binary", 0.0, 1.0)
DIGITS = DataInfo((1, 8, 8), "image", -1.0, 1.0, 8.0, 8.0)
VECTOR = DataInfo((2,), "vector")
TINY_LATENT = ["model.nz=4", "model.ngf=2", "model.ndf=8"]
TINY_DAMC = ["model.prior_sampler=damc", "model.damc_width=8", "model.damc_emb=8",
             "model.damc_time_emb=8", "model.damc_encoder_width=2", "model.damc_steps=3"]

CASES = {
    "ebm": ("ebm_8gaussians", VECTOR, ["model.hidden=8"], ["x"]),
    "dsm": ("dsm_8gaussians", VECTOR, ["model.hidden=8"], ["x"]),
    "rbm": ("rbm_digits", DIGITS_BINARY, ["model.n_hidden=6"], ["gibbs"]),
    "grbm": ("grbm_digits", DIGITS, ["model.n_hidden=6"], ["gibbs"]),
    "lebm": ("lebm_mnist", MNIST, TINY_LATENT, ["prior", "posterior"]),
    "lebm_gaussian": ("lebm_mnist", MNIST, [*TINY_LATENT, "model.prior=gaussian"],
                      ["posterior"]),
    "damc": ("damc_mnist", MNIST, [*TINY_LATENT, *TINY_DAMC], ["prior", "posterior"]),
    "dual_mcmc": ("dual_mcmc_fashion", MNIST, ["model.nz=4", "model.ebm_channels=4",
                                               "model.gen_channels=8", "model.inf_channels=4"],
                  ["x", "z"]),
}


def setup(case: str):
    recipe, info, overrides, kinds = CASES[case]
    torch.manual_seed(0)
    cfg = resolve(recipe, overrides)
    model = build_model(cfg, info).eval()
    low = 0.0 if info.kind == "binary" else -1.0
    x = torch.rand(6, *info.shape) * (1 - low) + low
    if info.kind == "binary":
        x = x.round()
    return cfg, model, LoadedData(train=x, test=x[:4], info=info), kinds


@pytest.mark.parametrize("case", list(CASES))
def test_every_family_gives_its_chains_and_the_eval_keys(case):
    """Each model's chain kinds, ``chains`` chains of ``steps`` draws per target (the posterior
    chains: one set per test image), and finite diagnostics for each."""
    cfg, model, data, kinds = setup(case)
    assert "chains" in eval_spec(model.name).metrics
    drawn = draw_chains(model, data, chains=3, steps=12, generator=torch.Generator().manual_seed(0))
    assert [k.name for k in drawn] == kinds
    for k in drawn:
        targets = 2 if k.name in ("posterior", "z") else 1
        assert k.energy.shape == (targets, 3, 12) and torch.isfinite(k.energy).all()
        assert 0.0 <= k.accept <= 1.0
    out = chain_results(drawn, warmup=0.5)
    for k in kinds:
        for key in ("chain_ess_bulk_", "chain_ess_tail_", "chain_rhat_", "accept_"):
            assert np.isfinite(out[key + k]), key + k
    assert out["chain_n"] == 3 and out["chain_steps"] == 12 and out["chain_warmup"] == 6
    if case in ("rbm", "grbm"):
        assert out["accept"] == 1.0  # Gibbs draws from exact conditionals: always accepted


def test_keys_combine_the_worst_of_every_kind():
    """``chain_ess``: the smallest bulk or tail ESS; ``chain_rhat``: the largest R̂; ``accept``:
    the smallest rate; each over kinds and targets, after dropping the warm-up."""
    rng = np.random.default_rng(0)
    mixed = torch.from_numpy(rng.normal(size=(1, 4, 40)))
    stuck = torch.from_numpy(np.stack([rng.normal(size=(4, 40)),
                                       rng.normal(size=(4, 40)) + np.arange(4)[:, None]]))
    kinds = [ChainKind("a", mixed, 0.9), ChainKind("b", stuck, 0.4)]
    out = chain_results(kinds, warmup=0.25)
    a = summarize(mixed[0, :, 10:])
    b = [summarize(stuck[t, :, 10:]) for t in range(2)]
    assert out["chain_ess_bulk_a"] == a["ess_bulk"] and out["chain_rhat_a"] == a["rhat"]
    assert out["chain_ess_bulk_b"] == min(s["ess_bulk"] for s in b)
    assert out["chain_ess_tail_b"] == min(s["ess_tail"] for s in b)
    assert out["chain_rhat_b"] == max(s["rhat"] for s in b)
    assert out["chain_ess"] == min(a["ess_bulk"], a["ess_tail"], *(s["ess_bulk"] for s in b),
                                   *(s["ess_tail"] for s in b))
    assert out["chain_rhat"] == out["chain_rhat_b"] > 1.05
    assert out["accept"] == 0.4 and out["accept_a"] == 0.9
    assert out["chain_warmup"] == 10
    lines = table(out)
    assert "NOT mixed" in lines[-1] and lines[-2].endswith("mixed")


def test_eval_metric_chains_alone_writes_keys_traces_and_picture(tmp_path):
    """``--metrics chains`` runs the chains and nothing else (no density picture), merges the
    keys and leaves ``chains.npz`` and ``chains.png`` in the run directory."""
    cfg, model, data, _ = setup("ebm")
    out = evaluate(cfg, model, ["chains"], data=data, run_dir=tmp_path)
    assert {"chain_ess", "chain_rhat", "accept"} <= out.keys()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chains.npz", "chains.png"]
    with np.load(tmp_path / "chains.npz") as f:
        assert f["energy_x"].shape == (1, 4, 400) and int(f["warmup"]) == 200
        again = summarize(f["energy_x"][0, :, 200:])
    assert out["chain_rhat_x"] == again["rhat"]
    json.dumps(out)  # every value is plain JSON


def test_diagnose_is_repeatable_and_leaves_the_callers_random_stream():
    _, model, data, _ = setup("ebm")
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    a = diagnose(model, data, chains=2, steps=10, seed=3)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert a == diagnose(model, data, chains=2, steps=10, seed=3)


@pytest.mark.parametrize("kwargs, words", [
    (dict(chains=1), ["--chains >= 2", "got 1 chains"]),
    (dict(steps=4), ["--steps >= 8", "of 4 steps"]),
    (dict(warmup=1.0), ["--warmup 1.0", "[0, 1)"]),
    (dict(steps=8, warmup=0.9), ["at least 4 draws", "got 1", "--steps"]),
])
def test_bad_chain_settings_name_the_problem_and_the_fix(kwargs, words):
    _, model, data, _ = setup("ebm")
    with pytest.raises(ConfigError) as err:
        diagnose(model, data, **kwargs)
    for w in words:
        assert w in str(err.value), str(err.value)


def test_a_model_without_chains_says_so():
    with pytest.raises(ConfigError, match="'classifier': no chains to diagnose"):
        draw_chains(SimpleNamespace(name="classifier", options=None, device="cpu"), None)


def test_a_noise_free_chain_has_no_acceptance_rate():
    """``model.noise_scale=0`` makes the Langevin chain gradient descent: there is no MALA twin,
    so ``accept`` is null (JSON) and the table says n/a."""
    torch.manual_seed(0)
    cfg = resolve("ebm_8gaussians", ["model.hidden=8", "model.noise_scale=0"])
    model = build_model(cfg, VECTOR).eval()
    data = LoadedData(train=torch.randn(6, 2), test=torch.randn(4, 2), info=VECTOR)
    out = diagnose(model, data, chains=2, steps=10)
    assert out["accept"] is None and out["accept_x"] is None
    assert " n/a " in table(out)[-1]
    assert json.loads(json.dumps(out))["accept"] is None
