"""Data-space EBM update by value: with the negatives pinned, the energy network's gradient is
``mean ∇θE(x⁺) − mean ∇θE(x⁻) + λ ∇θ[mean E(x⁺)² + mean E(x⁻)²]`` (maximum likelihood plus
the squared-energy regulariser of Du & Mordatch 2019, §3.3), computed here by autograd on a
copy of the network."""

from __future__ import annotations

import copy

import pytest
import torch

from shortrun.data.base import DataInfo
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

VECTOR = DataInfo((2,), "vector")


def make(*overrides: str):
    torch.manual_seed(0)
    cfg = resolve("ebm_8gaussians", ["model.hidden=8", "model.depth=2", "model.chain=noise",
                                     "model.jumps=0", "train.grad_clip=null", *overrides])
    return build_model(cfg, VECTOR)


def zero_lr_optimizers(model) -> dict[str, torch.optim.Optimizer]:
    """An optimiser that leaves the parameters where they are: the gradients stay readable."""
    return {"main": torch.optim.SGD(model.parameters(), lr=0.0)}


@pytest.mark.parametrize("energy_reg", [0.0, 0.3])
def test_energy_gradient_is_positive_minus_negative_phase_plus_regulariser(monkeypatch,
                                                                           energy_reg):
    model = make(f"model.energy_reg={energy_reg}")
    g = torch.Generator().manual_seed(1)
    x_pos = torch.randn(16, 2, generator=g)
    x_neg = 3.0 * torch.randn(16, 2, generator=g) + 1.0
    monkeypatch.setattr(model, "run_chain", lambda x0, *a, **k: x_neg.clone())
    twin = copy.deepcopy(model.energy)
    e_pos, e_neg = twin(x_pos), twin(x_neg)
    want_loss = e_pos.mean() - e_neg.mean() + energy_reg * ((e_pos**2).mean()
                                                            + (e_neg**2).mean())
    want = torch.autograd.grad(want_loss, list(twin.parameters()))
    metrics = model.training_step(x_pos, 0, zero_lr_optimizers(model))
    for p, w in zip(model.energy.parameters(), want, strict=True):
        torch.testing.assert_close(p.grad, w, rtol=1e-5, atol=1e-6)
    assert metrics["loss"] == pytest.approx(float(want_loss.detach()), rel=1e-5)
    assert metrics["energy_pos"] == pytest.approx(float(e_pos.detach().mean()), rel=1e-5, abs=1e-6)
    assert metrics["energy_neg"] == pytest.approx(float(e_neg.detach().mean()), rel=1e-5, abs=1e-6)


def test_a_gradient_step_lowers_the_data_energy_relative_to_the_negatives(monkeypatch):
    """The direction on its own: a small SGD step on the model's loss widens the gap
    ``mean E(x⁻) − mean E(x⁺)`` (first order: by lr·‖g‖² > 0)."""
    model = make()
    x_pos = torch.randn(32, 2, generator=torch.Generator().manual_seed(2))
    x_neg = x_pos + 2.0
    monkeypatch.setattr(model, "run_chain", lambda x0, *a, **k: x_neg.clone())

    def gap():
        with torch.no_grad():
            return float(model.energy(x_neg).mean() - model.energy(x_pos).mean())

    before = gap()
    model.training_step(x_pos, 0, {"main": torch.optim.SGD(model.parameters(), lr=1e-3)})
    assert gap() > before
