"""Text LEBM and LSTM LM: decoder likelihood, posterior drift, NLL estimator, training, errors."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from torch import nn

from shortrun.data.base import DataInfo
from shortrun.data.ptb import BOS_ID, EOS_ID, PAD_ID
from shortrun.errors import ConfigError
from shortrun.evaluation.text import text_nll
from shortrun.metrics.text import (
    gaussian_log_density,
    importance_log_px,
    log_partition,
    perplexity,
)
from shortrun.models.registry import build_model
from shortrun.models.text_nets import TokenLSTM
from shortrun.samplers.langevin import langevin_step
from shortrun.train.config import resolve
from shortrun.train.trainer import Trainer

V, L = 12, 8
INFO = DataInfo((L,), "text", 0.0, float(V - 1))
TINY = ["model.nz=4", "model.emb=6", "model.hidden=8", "model.ndf=8", "model.prior_steps=4",
        "model.post_steps=3", "model.nll_chains=4", "model.nll_samples=8",
        "model.log_z_samples=1000"]
BATCH = torch.tensor([[BOS_ID, 5, 7, 3, EOS_ID, PAD_ID, PAD_ID, PAD_ID],
                      [BOS_ID, 4, EOS_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID],
                      [BOS_ID, 9, 9, 10, 11, 6, 8, EOS_ID]])


def make(*overrides: str, info: DataInfo = INFO):
    torch.manual_seed(0)
    return build_model(resolve("lebm_ptb_small", [*TINY, *overrides]), info)


class LinearTilt(nn.Module):
    """``f(z) = a·z``: ``exp(a·z) N(0, σ²I) / Z`` is ``N(σ² a, σ² I)``, ``log Z = σ²‖a‖²/2``."""

    def __init__(self, a: torch.Tensor) -> None:
        super().__init__()
        self.a = nn.Parameter(a.clone())

    def forward(self, z):
        return z @ self.a


def ignore_z(dec: TokenLSTM) -> None:
    """Zero every weight that reads z: the decoder becomes a plain LM."""
    with torch.no_grad():
        dec.init_state.weight.zero_()
        dec.init_state.bias.zero_()
        dec.lstm.weight_ih_l0[:, -dec.nz:].zero_()


def test_decoder_log_prob_is_the_sum_of_log_softmax_at_the_next_tokens():
    torch.manual_seed(0)
    dec = TokenLSTM(V, 6, 8, nz=4)
    z = torch.randn(3, 4)
    logits, _ = dec(BATCH[:, :-1], z)
    lp = logits.log_softmax(-1)
    want = torch.zeros(3)
    for b in range(3):
        for t in range(L - 1):
            nxt = int(BATCH[b, t + 1])
            if nxt != PAD_ID:  # <pad> targets do not count; </s> does
                want[b] += lp[b, t, nxt]
    torch.testing.assert_close(dec.log_prob(BATCH, z), want)
    # Extra padding changes nothing; z does change the likelihood.
    wider = torch.cat([BATCH, torch.zeros(3, 5, dtype=torch.int64)], 1)
    torch.testing.assert_close(dec.log_prob(wider, z), want)
    assert not torch.allclose(dec.log_prob(BATCH, z + 1.0), want)


def test_generate_makes_bos_words_eos_then_padding():
    torch.manual_seed(0)
    dec = TokenLSTM(V, 6, 8, nz=4)
    x = dec.generate(50, L, torch.randn(50, 4), torch.Generator().manual_seed(0))
    assert x.shape == (50, L) and bool((x[:, 0] == BOS_ID).all())
    for row in x.tolist():
        end = row.index(EOS_ID)  # every row ends (forced at the last position)
        assert all(t not in (PAD_ID, BOS_ID, EOS_ID) for t in row[1:end])
        assert all(t == PAD_ID for t in row[end + 1:])


def test_posterior_langevin_step_uses_the_posterior_energy_gradient():
    # One step of the model's posterior chain vs z0 − ½s²∇E(z0) + sξ with ∇E from central
    # finite differences of −log p(x|z) − f(z) + ‖z‖²/2 in float64 (error O(h²) ≈ 1e-10).
    m = make().double()
    x = BATCH
    s = m.options.post_step_size
    g = torch.Generator().manual_seed(3)
    z1 = m.sample_posterior(x, steps=1, generator=g)
    g = torch.Generator().manual_seed(3)
    z0 = torch.randn((3, 4), generator=g, dtype=torch.float64)
    noise = torch.randn((3, 4), generator=g, dtype=torch.float64)

    def energy(z):
        with torch.no_grad():
            return -m.generator.log_prob(x, z) - m.tilt(z) + z.pow(2).sum(1) / 2

    h, grad = 1e-5, torch.zeros_like(z0)
    for i in range(4):
        e = torch.zeros_like(z0)
        e[:, i] = h
        grad[:, i] = (energy(z0 + e) - energy(z0 - e)) / (2 * h)
    torch.testing.assert_close(z1, z0 - 0.5 * s * s * grad + s * noise, atol=1e-7, rtol=0)
    # and the kernel's own autograd gradient agrees with the finite differences
    _, info = langevin_step(lambda z: m.posterior_energy(z, x), z0, s, 0.0)
    torch.testing.assert_close(info.grad_norm, grad.norm(dim=1), atol=1e-7, rtol=0)


def test_log_partition_and_normalised_prior_of_a_linear_tilt():
    a, sigma = torch.tensor([0.5, -0.3, 0.2, 0.4]), 1.2
    exact = sigma**2 * float(a @ a) / 2
    n = 200_000
    est = log_partition(LinearTilt(a), 4, sigma, n, generator=torch.Generator().manual_seed(0))
    # SE of log mean exp(a·z) ≈ √(exp(σ²‖a‖²) − 1)/√n; 4 SE.
    assert abs(est - exact) < 4 * math.sqrt(math.exp(2 * exact) - 1) / math.sqrt(n)
    m = make(f"model.prior_sigma={sigma}")
    m.tilt = LinearTilt(a)
    z = torch.randn(5, 4)
    torch.testing.assert_close(m.prior_log_density(z, exact),
                               gaussian_log_density(z, sigma**2 * a, sigma))


def test_importance_sampling_is_exact_when_the_proposal_is_the_target():
    target = 0.25 + torch.zeros(3)
    mean, std = torch.zeros(3, 4), torch.ones(3, 4)
    # log p(x, z) = log p(x) + log N(z; 0, I) and q = N(0, I): every weight is p(x).
    est = importance_log_px(lambda z: target - 3.0 + 3.0 + gaussian_log_density(z, 0.0, 1.0),
                            mean, std, 5)
    torch.testing.assert_close(est, target)


def test_importance_sampling_with_a_mismatched_proposal_is_within_its_standard_error():
    k, g_seed = 4000, 7
    mean, std = torch.full((1, 4), 0.2), torch.full((1, 4), 1.1)

    def log_joint(z):  # p(x) = 1, p(z|x) = N(0, I)
        return gaussian_log_density(z, 0.0, 1.0)

    est = float(importance_log_px(log_joint, mean, std, k, torch.Generator().manual_seed(g_seed)))
    g = torch.Generator().manual_seed(g_seed)  # the same draws, to measure the weights' spread
    zs = torch.stack([mean + std * torch.randn(mean.shape, generator=g) for _ in range(k)])
    w = (log_joint(zs) - gaussian_log_density(zs, mean, std)).exp().flatten()
    rel_se = float(w.std() / w.mean()) / math.sqrt(k)  # SE of log(mean w) by the delta method
    assert abs(est) < 4 * rel_se


def test_nll_of_a_decoder_that_ignores_z_equals_the_plain_lm_nll():
    # Gaussian prior (log Z = 0 exactly) and p(x|z) = p(x): log p(x) = log p(x|·) and the
    # posterior is the prior, so only the proposal mismatch remains: with 64 chains the fitted
    # std is within ~10% of the prior's and the weight spread ≲ 0.5, SE ≈ 0.5/√2000 ≈ 0.011.
    m = make("model.prior=gaussian", "model.nll_chains=64", "model.nll_samples=2000")
    ignore_z(m.generator)
    exact = m.generator.log_prob(BATCH, torch.zeros(3, 4)).detach()
    torch.manual_seed(1)
    est = m.log_px(BATCH, m.log_partition())
    assert m.log_partition() == 0.0
    torch.testing.assert_close(est, exact, atol=0.05, rtol=0)
    cfg = resolve("lebm_ptb_small", [*TINY, "model.prior=gaussian", "model.nll_chains=64",
                                     "model.nll_samples=2000"])
    out = text_nll(m, cfg, BATCH)
    assert out["nll_sentences"] == 3.0
    assert out["nll"] == pytest.approx(-float(exact.mean()), abs=0.05)
    # 4 + 2 + 7 scored targets
    assert out["nll_ppl"] == pytest.approx(math.exp(-float(exact.sum()) / 13), rel=0.05)


def test_perplexity_is_exp_of_nll_per_scored_token():
    # a scorer giving log p = −c per scored token (targets: words and </s>) → ppl = e^c.
    c = 1.7

    def log_prob(x):
        return -c * ((x != PAD_ID).sum(1) - 1).double()

    assert perplexity(log_prob, BATCH, batch_size=2) == pytest.approx(math.exp(c))


def test_lebm_text_needs_text_data():
    with pytest.raises(ConfigError, match=r"needs a text dataset \(data.name=ptb\)"):
        make(info=DataInfo((1, 28, 28), "image", -1.0, 1.0))


def write_corpus(root: Path) -> Path:
    (root / "ptb").mkdir(parents=True)
    words = "the a cat dog sat ran on mat".split()
    g = torch.Generator().manual_seed(0)
    lines = [" ".join(words[int(i)] for i in torch.randint(0, 8, (int(n),), generator=g))
             for n in torch.randint(2, 7, (64,), generator=g)]
    for split in ("train", "valid", "test"):
        (root / "ptb" / f"ptb.{split}.txt").write_text("\n".join(lines) + "\n")
    return root


RUN = ["train.batch_size=16", "train.log_every=2", "train.ckpt_every=2", "train.sample_every=4",
       "train.progress=false", "train.threads=1", "sample.n=4"]


def test_short_training_resume_and_eval(tmp_path, capsys):
    from shortrun.cli import main

    root = write_corpus(tmp_path / "data")
    base = [*TINY, *RUN, f"data.data_dir={root}", "data.max_words=null"]
    cfg = resolve("lebm_ptb_small", [*base, "train.steps=4"])
    Trainer(cfg, tmp_path / "run").fit()
    assert (tmp_path / "run" / "samples" / "step_0000004.txt").read_text().count("\n") == 4
    cfg6 = resolve("lebm_ptb_small", [*base, "train.steps=6"])
    res = Trainer(cfg6, tmp_path / "run", resume=True).fit()
    assert res.step == 6
    logged = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(r)["step"] for r in logged]
    assert steps == [2, 4, 6]
    # an LM for fppl/rppl, then the three metrics through the CLI
    lm_cfg = resolve("lstm_lm_ptb", [*RUN, "model.emb=6", "model.hidden=8", "train.steps=4",
                                     f"data.data_dir={root}"])
    Trainer(lm_cfg, tmp_path / "lm").fit()
    assert main(["eval", str(tmp_path / "run"), "--metrics", "fppl"]) == 2
    assert re.search(r"needs model.lm_run.*shortrun train lstm_lm_ptb", capsys.readouterr().err)
    assert main(["eval", str(tmp_path / "run"), "--metrics", "rppl",
                 "--set", f"model.lm_run={tmp_path / 'nope'}"]) == 2
    assert re.search(r"model.lm_run: .* is not a directory", capsys.readouterr().err)
    rc = main(["eval", str(tmp_path / "run"), "--metrics", "nll,fppl,rppl",
               "--set", f"model.lm_run={tmp_path / 'lm'}", "--set", "model.rppl_steps=2",
               "--set", "eval.n_samples=20"])
    assert rc == 0
    out = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert {"nll", "fppl", "rppl", "nll_ppl", "nll_log_z"} <= set(out)
    # an untrained model on an 11-word vocabulary: every perplexity lies in (1, V].
    assert all(1 < out[k] < 2 * V for k in ("fppl", "rppl", "nll_ppl"))
    lm_eval = main(["eval", str(tmp_path / "lm")])
    assert lm_eval == 0 and "ppl" in json.loads((tmp_path / "lm" / "eval.json").read_text())


def test_sample_cli_writes_sentences_for_text_runs(tmp_path, capsys, tiny_ebm_overrides):
    import numpy as np

    from shortrun.cli import main

    root = write_corpus(tmp_path / "data")
    vocab = set("the a cat dog sat ran on mat <unk>".split())
    cfg = resolve("lebm_ptb_small", [*TINY, *RUN, "train.steps=2", f"data.data_dir={root}",
                                     "data.max_words=null"])
    Trainer(cfg, tmp_path / "run").fit()
    run = str(tmp_path / "run")
    assert main(["sample", run, "--n", "7", "--out", str(tmp_path / "s.txt")]) == 0
    lines = (tmp_path / "s.txt").read_text().splitlines()
    assert len(lines) == 7 and all(set(line.split()) <= vocab for line in lines)
    assert main(["sample", run, "--n", "3", "--out", str(tmp_path / "s.npz")]) == 0
    x = np.load(tmp_path / "s.npz")["x"]
    assert x.shape == (3, 8) and x.dtype == np.int64 and (x[:, 0] == BOS_ID).all()
    capsys.readouterr()
    assert main(["sample", run, "--out", str(tmp_path / "s.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a text model (lebm_text); use --out FILE.txt" in err
    # the converse: an image / point run asked for sentences
    Trainer(resolve("ebm_8gaussians", tiny_ebm_overrides), tmp_path / "pts").fit()
    capsys.readouterr()
    assert main(["sample", str(tmp_path / "pts"), "--out", str(tmp_path / "p.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ".txt is for text models" in err
    assert not (tmp_path / "p.txt").exists() and not (tmp_path / "s.png").exists()
