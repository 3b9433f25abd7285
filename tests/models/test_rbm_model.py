"""RBM models: the closed-form update is the autograd gradient, centering keeps the model,
resume is bit-identical, eval writes the issue's keys, bad inputs say what is wrong."""

import json

import pytest
import torch

from shortrun.cli import main
from shortrun.energies.rbm import GaussianRBMParams
from shortrun.errors import ConfigError
from shortrun.hardware import bf16_missing
from shortrun.samplers.gibbs import block_gibbs, hidden_state
from shortrun.samplers.sources import DataSource, PersistentChains, TemperedChains
from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.config import resolve
from shortrun.train.rundir import read_config
from shortrun.train.trainer import Trainer

TINY = ["train.steps=8", "train.batch_size=20", "train.progress=false", "train.log_every=2",
        "train.sample_every=1000", "train.ckpt_every=4", "model.n_hidden=6",
        "model.n_chains=20", "sample.n=4", "sample.steps=3", "model.ais_betas=50",
        "model.ais_runs=4"]


def build(recipe, *overrides, tmp_path=None):
    cfg = resolve(recipe, [*TINY, *overrides])
    return Trainer(cfg, tmp_path / "run")


def autograd_grads(free_energy, params, v_data, v_model):
    loss = free_energy(v_data).mean() - free_energy(v_model).mean()
    return torch.autograd.grad(loss, params)


@pytest.mark.parametrize("centering", [False, True])
def test_closed_form_update_equals_autograd_of_free_energy_gap(tmp_path, centering):
    t = build("rbm_digits", f"model.centering={str(centering).lower()}", tmp_path=tmp_path)
    model = t.model
    with torch.no_grad():  # make the offsets and parameters generic
        model.W.normal_(0, 0.5)
        model.c.normal_()
        model.mu.uniform_(0.2, 0.8)
        model.lam.uniform_(0.2, 0.8)
    v = t.data.train[:20].reshape(20, -1)
    pos = hidden_state(model.params(), v)
    neg = block_gibbs(model.params(), pos, 3, generator=torch.Generator().manual_seed(0))
    model.write_gradients(pos, neg)
    closed = [model.W.grad.clone(), model.b.grad.clone(), model.c.grad.clone()]
    if not centering:
        model.mu.zero_()
        model.lam.zero_()
    auto = autograd_grads(model.centered_free_energy, [model.W, model.b, model.c], v, neg.v)
    for a, c in zip(auto, closed, strict=True):
        assert torch.allclose(a, c, atol=1e-6, rtol=1e-5)


@pytest.mark.skipif(
    bf16_missing("cpu") is not None,
    reason="train.precision=bf16 is refused on a CPU without native bf16 (AVX512-BF16/AMX)")
def test_bf16_precision_keeps_the_update_to_bf16_rounding(tmp_path, mkldnn_enabled):
    """train.precision=bf16: the products run in bfloat16 (float32 accumulation) and the weight
    gradient stays within bf16 rounding (2⁻⁸ relative) of the float32 one for the same states."""
    if not torch.backends.mkldnn.is_available():
        pytest.skip("no oneDNN in this torch build")
    mkldnn_enabled(True)
    t = build("rbm_digits", "train.precision=bf16", tmp_path=tmp_path)
    model = t.model
    with torch.no_grad():
        model.W.normal_(0, 0.5)
    v = t.data.train[:64].reshape(64, -1)
    pos = hidden_state(model.params(), v)
    neg = block_gibbs(model.params(), pos, 1, generator=torch.Generator().manual_seed(0))
    model.write_gradients(pos, neg)
    fp32 = model.W.grad.clone()
    with t.autocast():
        pos16 = hidden_state(model.params(), v)
        model.write_gradients(pos16, neg)
    assert pos16.h_prob.dtype == torch.float32  # the products come back in float32
    assert model.W.grad.dtype == torch.float32 and not torch.equal(model.W.grad, fp32)
    scale = fp32.abs().max()
    assert (model.W.grad - fp32).abs().max() <= 2 ** -6 * scale
    assert (pos16.h_prob - pos.h_prob).abs().max() <= 2e-2


def test_gaussian_closed_form_update_equals_autograd(tmp_path):
    t = build("grbm_digits", tmp_path=tmp_path)
    model = t.model
    with torch.no_grad():
        model.W.normal_(0, 0.3)
        model.c.normal_()
        model.log_var.normal_(0, 0.3)
    v = t.data.train[:20].reshape(20, -1)
    pos = hidden_state(model.params(), v)
    neg = block_gibbs(model.params(), pos, 2, generator=torch.Generator().manual_seed(0))
    model.write_gradients(pos, neg)
    closed = [model.W.grad, model.b.grad, model.c.grad, model.log_var.grad]
    live = [model.W, model.b, model.c, model.log_var]

    def free_energy(x):
        return GaussianRBMParams(*live).free_energy(x)

    auto = autograd_grads(free_energy, live, v, neg.v)
    for a, c in zip(auto, closed, strict=True):
        assert torch.allclose(a, c, atol=1e-5, rtol=1e-4)


def test_centering_offset_update_leaves_the_distribution_unchanged(tmp_path):
    t = build("rbm_digits", "model.centering=true", tmp_path=tmp_path)
    model = t.model
    with torch.no_grad():
        model.W.normal_(0, 0.5)
    before = model.params()
    v = t.data.train[:20].reshape(20, -1)
    pos = hidden_state(before, v)
    mu0 = model.mu.clone()
    model.before_gradients(pos)
    after = model.params()
    assert not torch.equal(mu0, model.mu)
    assert torch.allclose(model.mu, 0.99 * mu0 + 0.01 * v.mean(0))
    for x, y in ((before.W, after.W), (before.b, after.b), (before.c, after.c)):
        assert torch.allclose(x, y, atol=1e-6)


@pytest.mark.parametrize("extra", [
    ["model.learning=pcd"],
    ["model.learning=fpcd", "model.centering=true", "model.momentum=0.5"],
    ["model.chain=tempering", "model.n_temps=3", "model.learning=pcd"],
])
def test_straight_equals_half_resume_half(tmp_path, extra):
    base = [*TINY, *extra, "train.lr_decay=0.9"]
    Trainer(resolve("rbm_digits", [*base, "train.steps=8"]), tmp_path / "a").fit()
    Trainer(resolve("rbm_digits", [*base, "train.steps=4"]), tmp_path / "b").fit()
    Trainer(read_config(tmp_path / "b", ["train.steps=8"]), tmp_path / "b", resume=True).fit()
    a = load_checkpoint(tmp_path / "a" / "checkpoints" / "last.pt")["model"]
    b = load_checkpoint(tmp_path / "b" / "checkpoints" / "last.pt")["model"]
    assert a.keys() == b.keys()
    persistent = {"source.chains", "source.states", "W_fast"} & set(a)
    assert persistent, "chain state must be in the checkpoint"
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_eval_writes_the_issue_keys(tmp_path):
    run = tmp_path / "run"
    Trainer(resolve("rbm_digits", TINY), run).fit()
    assert main(["eval", str(run), "--metrics", "loglik"]) == 0
    out = json.loads((run / "eval.json").read_text())
    assert out["log_z_method"] == "exact" and out["log_z_stderr"] == 0.0
    for key in ("loglik_test", "loglik_train", "log_z"):
        assert isinstance(out[key], float)
    assert out["loglik_test"] < 0  # a probability mass below 1
    # AIS path: make the exact limit smaller than both layers
    assert main(["eval", str(run), "--metrics", "loglik", "--set", "model.exact_max_bits=4"]) == 0
    ais = json.loads((run / "eval.json").read_text())
    assert ais["log_z_method"] == "ais" and ais["log_z_stderr"] > 0


def test_sampling_and_persistent_chains_start_at_the_data(tmp_path):
    t = build("rbm_digits", tmp_path=tmp_path)
    chains = t.model.source.chains
    train = t.data.train.reshape(len(t.data.train), -1)
    assert all(bool((train == row).all(1).any()) for row in chains)
    x = t.model.sample(5, steps=2)
    assert x.shape == (5, 1, 8, 8) and set(x.unique().tolist()) <= {0.0, 1.0}


@pytest.mark.parametrize("learning, chain, source", [
    ("cd", "gibbs", DataSource), ("pcd", "gibbs", PersistentChains),
    ("fpcd", "gibbs", PersistentChains), ("pcd", "tempering", TemperedChains)])
def test_negatives_come_from_a_chain_source(tmp_path, learning, chain, source):
    """Every update starts its chains from ``model.source``: the batch (CD), or all
    ``n_chains`` persistent chains (PCD, FPCD) or tempered ladders (PT) — no rotation."""
    t = build("rbm_digits", f"model.learning={learning}", f"model.chain={chain}",
              "model.n_temps=3", tmp_path=tmp_path)
    src = t.model.source
    assert type(src) is source
    handed_out = []
    start = src.start
    src.start = lambda *a, **k: handed_out.append(start(*a, **k)) or handed_out[-1]
    t.fit()
    assert len(handed_out) == 8  # one start per update
    for x in handed_out:
        v = x.v if source is DataSource else x.replicas if source is TemperedChains else x
        assert v.shape[-2:] == (20, 64)  # batch 20 (CD) or all 20 chains


@pytest.mark.parametrize("extra, old_keys", [
    (["model.learning=pcd"], {"source.chains": "chains"}),
    (["model.chain=tempering", "model.n_temps=3"],
     {f"source.{k}": f"tempering.{k}" for k in ("betas", "states", "parity", "accepted",
                                                 "proposed")}),
])
def test_a_state_dict_written_before_the_chain_source_still_loads(tmp_path, extra, old_keys):
    """Checkpoints written before the RBM's chains moved into ``self.source`` keep them under
    ``chains`` (PCD) or ``tempering.*`` (PT); a load-time hook renames them."""
    t = build("rbm_digits", *extra, tmp_path=tmp_path / "a")
    t.fit()
    new_style = t.model.state_dict()
    old_style = {old_keys.get(k, k): v.clone() for k, v in new_style.items()}
    assert set(old_keys.values()) <= set(old_style) and not set(old_keys) & set(old_style)
    fresh = build("rbm_digits", *extra, tmp_path=tmp_path / "b").model
    fresh.load_state_dict(old_style)   # strict: no key missing, none unexpected
    for key, value in new_style.items():
        assert torch.equal(fresh.state_dict()[key], value), key


def test_bad_inputs_name_the_problem(tmp_path):
    with pytest.raises(ConfigError, match="model.chain: tempering runs persistent chains"):
        resolve("rbm_digits", ["model.chain=tempering", "model.learning=cd"])
    with pytest.raises(ConfigError, match="model.learning: must be one of"):
        resolve("rbm_digits", ["model.learning=cd2"])
    with pytest.raises(ConfigError, match="model.offset_rate: must be <= 1"):
        resolve("rbm_digits", ["model.offset_rate=2"])
    with pytest.raises(ConfigError, match=r"model rbm needs \{0,1\} data"):
        build("rbm_digits", "data.binarize=false", tmp_path=tmp_path)
    with pytest.raises(ConfigError, match="model grbm models real-valued data"):
        build("grbm_digits", "data.binarize=true", tmp_path=tmp_path / "g")
    t = build("grbm_digits", "model.n_hidden=30", tmp_path=tmp_path / "h")
    with pytest.raises(ConfigError, match="model.n_hidden=30 is over model.exact_max_bits=24"):
        t.model.log_z(t.data.train)
