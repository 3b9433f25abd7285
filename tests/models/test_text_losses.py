"""The text decoders' training losses against a hand-computed NLL: the text LEBM's generator
loss ``mean_b −Σ_t log p(x_t | x_<t, z⁺)`` (Pang et al. 2020 §5.2) and the LSTM LM's
``−Σ log p(x_t | x_<t) / #tokens``, written out from log-softmax of the logits. A uniform
predictor over V tokens has perplexity exactly V; any perplexity lies in (1, V] for a model no
worse than uniform."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from shortrun.data.base import DataInfo
from shortrun.data.ptb import BOS_ID, EOS_ID, PAD_ID
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

V, L = 12, 8
INFO = DataInfo((L,), "text", 0.0, float(V - 1))
BATCH = torch.tensor([[BOS_ID, 5, 7, 3, EOS_ID, PAD_ID, PAD_ID, PAD_ID],
                      [BOS_ID, 4, EOS_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID],
                      [BOS_ID, 9, 9, 10, 11, 6, 8, EOS_ID]])
TOKENS = 4 + 2 + 7  # scored targets: every word and </s>, not <s>, not <pad>


def hand_nll(decoder, x: torch.Tensor, z: torch.Tensor | None) -> torch.Tensor:
    """``−Σ_t log softmax(logits_t)[x_{t+1}]`` per sentence over the non-pad targets."""
    logits, _ = decoder(x[:, :-1], z)
    lp = logits.log_softmax(-1)
    rows = []
    for b in range(x.shape[0]):
        total = lp.new_zeros(())
        for t in range(x.shape[1] - 1):
            target = int(x[b, t + 1])
            if target != PAD_ID:
                total = total - lp[b, t, target]
        rows.append(total)
    return torch.stack(rows)


def make_lebm_text():
    torch.manual_seed(0)
    cfg = resolve("lebm_ptb_small", ["model.nz=4", "model.emb=6", "model.hidden=8",
                                     "model.ndf=8", "model.prior_steps=2", "model.post_steps=2",
                                     "train.grad_clip=null"])
    return build_model(cfg, INFO)


def test_text_lebm_generator_gradient_is_that_of_the_mean_sentence_nll(monkeypatch):
    model = make_lebm_text()
    z_pos = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    monkeypatch.setattr(model, "sample_posterior", lambda x, *a, **k: z_pos)
    monkeypatch.setattr(model, "sample_prior", lambda n, *a, **k: torch.zeros(n, 4))
    twin = copy.deepcopy(model.generator)
    nll = hand_nll(twin, BATCH, z_pos)
    want = torch.autograd.grad(nll.mean(), list(twin.parameters()))
    nll = nll.detach()
    opts = {"generator": torch.optim.SGD(model.generator.parameters(), lr=0.0),
            "prior": torch.optim.SGD(model.tilt.parameters(), lr=0.0)}
    metrics = model.training_step(BATCH, 0, opts)
    for p, w in zip(model.generator.parameters(), want, strict=True):
        torch.testing.assert_close(p.grad, w, rtol=1e-5, atol=1e-7)
    assert metrics["loss"] == pytest.approx(float(nll.mean()), rel=1e-5)
    assert metrics["ppl_post"] == pytest.approx(math.exp(float(nll.sum()) / TOKENS), rel=1e-5)


def test_text_lebm_uniform_decoder_has_perplexity_v(monkeypatch):
    model = make_lebm_text()
    with torch.no_grad():
        model.generator.out.weight.zero_()
        model.generator.out.bias.zero_()
    loss, extra = model.generator_loss(BATCH, torch.randn(3, 4))
    assert float(loss.detach()) == pytest.approx(TOKENS / 3 * math.log(V), rel=1e-6)
    assert extra["ppl_post"] == pytest.approx(V, rel=1e-6)


def make_lm():
    torch.manual_seed(0)
    cfg = resolve("lstm_lm_ptb", ["model.emb=6", "model.hidden=8", "model.dropout=0",
                                  "train.grad_clip=null"])
    return build_model(cfg, INFO)


def test_lstm_lm_loss_is_the_nll_per_scored_token():
    model = make_lm()
    twin = copy.deepcopy(model.lm)
    nll = hand_nll(twin, BATCH, None).sum() / TOKENS
    want = torch.autograd.grad(nll, list(twin.parameters()))
    nll = nll.detach()
    metrics = model.training_step(BATCH, 0, {"main": torch.optim.SGD(model.parameters(),
                                                                      lr=0.0)})
    for p, w in zip(model.lm.parameters(), want, strict=True):
        torch.testing.assert_close(p.grad, w, rtol=1e-5, atol=1e-7)
    assert metrics["loss"] == pytest.approx(float(nll), rel=1e-5)
    assert metrics["ppl"] == pytest.approx(math.exp(float(nll)), rel=1e-5)


def test_lstm_lm_uniform_predictor_has_perplexity_v_and_training_lowers_it():
    model = make_lm()
    with torch.no_grad():
        model.lm.out.weight.zero_()
        model.lm.out.bias.zero_()
    opt = {"main": torch.optim.Adam(model.parameters(), lr=0.05)}
    first = model.training_step(BATCH, 0, opt)["ppl"]
    assert first == pytest.approx(V, rel=1e-6)
    for step in range(1, 6):
        last = model.training_step(BATCH, step, opt)["ppl"]
    assert last < 0.9 * first  # Adam at lr 0.05 on one batch: well below uniform in 5 steps
