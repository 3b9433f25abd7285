"""Bernoulli RBM by value: the free energy the training step logs (and the divergence guard
watches), ``F(v) = −bᵀv − Σⱼ softplus(cⱼ + (Wᵀv)ⱼ)`` (Hinton 2002; Salakhutdinov & Murray 2008,
Eq. 11), and the fast-PCD fast-weight update ``θ_f ← decay·θ_f − fast_lr·∇θL`` (Tieleman &
Hinton 2009) with ``∇W L = ⟨v hᵀ⟩_chains − ⟨v hᵀ⟩_data`` written out by hand."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from shortrun.data.base import DataInfo
from shortrun.models.registry import build_model
from shortrun.samplers.gibbs import hidden_state
from shortrun.train.config import resolve

DIGITS = DataInfo((1, 8, 8), "binary", 0.0, 1.0)


def make(*overrides: str):
    torch.manual_seed(0)
    cfg = resolve("rbm_digits", ["model.n_hidden=5", "model.n_chains=10",
                                 "model.centering=false", "model.momentum=0",
                                 "train.weight_decay=0", *overrides])
    model = build_model(cfg, DIGITS)
    with torch.no_grad():
        model.W.normal_(0, 0.3)
        model.b.normal_(0, 0.5)
        model.c.normal_(0, 0.5)
    return model


def batch(seed: int, n: int = 12) -> torch.Tensor:
    return (torch.rand(n, 64, generator=torch.Generator().manual_seed(seed)) < 0.4).float()


def closed_form_free_energy(model, v: torch.Tensor) -> torch.Tensor:
    W, b, c = (t.detach().double() for t in (model.W, model.b, model.c))
    v = v.double()
    return -(v @ b) - F.softplus(c + v @ W).sum(1)


def test_free_energy_from_a_gibbs_state_is_the_closed_form():
    model = make()
    v = batch(1)
    got = model.free_energy_from(hidden_state(model.params(), v))
    torch.testing.assert_close(got.double(), closed_form_free_energy(model, v),
                               rtol=1e-5, atol=1e-5)


def test_logged_energies_are_the_free_energies_of_data_and_chains(monkeypatch):
    model = make("model.learning=cd")
    v, v_neg = batch(2), batch(3)
    monkeypatch.setattr(model, "negative_phase",
                        lambda pos: hidden_state(model.params(), v_neg))
    want_pos = float(closed_form_free_energy(model, v).mean())
    want_neg = float(closed_form_free_energy(model, v_neg).mean())
    metrics = model.training_step(v, 0, {"main": torch.optim.SGD(model.parameters(), lr=0.0)})
    assert metrics["energy_pos"] == pytest.approx(want_pos, rel=1e-5)
    assert metrics["energy_neg"] == pytest.approx(want_neg, rel=1e-5)
    assert metrics["loss"] == pytest.approx(want_pos - want_neg, rel=1e-4, abs=1e-5)


def test_fast_weights_decay_and_step_against_the_gradient(monkeypatch):
    lr, fast_lr, decay = 0.05, 0.07, 0.9
    model = make("model.learning=fpcd", f"train.lr={lr}", f"model.fast_lr={fast_lr}",
                 f"model.fast_decay={decay}")
    v, v_neg = batch(4), batch(5)
    monkeypatch.setattr(model, "negative_phase",
                        lambda pos: hidden_state(model.params(), v_neg))
    with torch.no_grad():
        W, b, c = (t.detach().clone() for t in (model.W, model.b, model.c))
        h_pos, h_neg = torch.sigmoid(c + v @ W), torch.sigmoid(c + v_neg @ W)
        grad_W = v_neg.T @ h_neg / len(v_neg) - v.T @ h_pos / len(v)
        grad_b = v_neg.mean(0) - v.mean(0)
        grad_c = h_neg.mean(0) - h_pos.mean(0)
        start = [0.01 * torch.ones_like(t) for t in (W, b, c)]
        for buf, s in zip((model.W_fast, model.b_fast, model.c_fast), start, strict=True):
            buf.copy_(s)
    model.training_step(v, 0, {"main": torch.optim.SGD(model.parameters(), lr=lr)})
    for fast, s, grad, slow, before in ((model.W_fast, start[0], grad_W, model.W, W),
                                        (model.b_fast, start[1], grad_b, model.b, b),
                                        (model.c_fast, start[2], grad_c, model.c, c)):
        torch.testing.assert_close(fast, decay * s - fast_lr * grad, rtol=1e-5, atol=1e-6)
        # the slow weights took the same direction (plain SGD at lr)
        torch.testing.assert_close(slow.detach() - before, -lr * grad, rtol=1e-4, atol=1e-6)
