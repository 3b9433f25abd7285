"""``ed_rbm``: energy discrepancy on the RBM's free energy, evaluated like every RBM."""

from __future__ import annotations

import copy

import pytest
import torch

from shortrun.data.base import DataInfo
from shortrun.errors import ConfigError
from shortrun.models.ed_rbm import EDRBM
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

INFO = DataInfo((6,), "binary", 0.0, 1.0)


def make(*overrides: str) -> EDRBM:
    torch.manual_seed(0)
    cfg = resolve("ed_rbm_digits", ["model.n_hidden=4", *overrides])
    model = build_model(cfg, INFO)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)
    return model


def test_the_graph_free_energy_is_the_rbms() -> None:
    model = make()
    v = (torch.rand(10, 6, generator=torch.Generator().manual_seed(1)) < 0.5).float()
    torch.testing.assert_close(model.free_energy_graph(v), model.params().free_energy(v))


def test_update_is_ed_with_two_rounds_of_bit_flips_written_out() -> None:
    """Same global RNG draws: ``y`` flips each bit of ``v`` where ``u < ε``, each ``v⁻_j``
    flips ``y`` again; the gradient is that of the ED loss written out on the free energy."""
    model = make("model.ed_m=3", "model.flip_prob=0.2", "model.ed_w=1.0")
    v = (torch.rand(5, 6, generator=torch.Generator().manual_seed(2)) < 0.5).float()
    W, b, c = (copy.deepcopy(p.detach()).requires_grad_(True) for p in (model.W, model.b,
                                                                        model.c))

    def free(x: torch.Tensor) -> torch.Tensor:
        return -(x @ b) - torch.nn.functional.softplus(c + x @ W).sum(-1)

    torch.manual_seed(5)
    u = torch.rand(v.shape)
    y = torch.where(u < 0.2, 1 - v, v)
    u2 = torch.rand((3, *v.shape))
    v_neg = torch.where(u2 < 0.2, 1 - y, y)
    diffs = free(v)[None] - torch.stack([free(v_neg[j]) for j in range(3)])
    want_loss = torch.log(1.0 / 3 + diffs.exp().sum(0) / 3).mean()
    want = torch.autograd.grad(want_loss, [W, b, c])
    torch.manual_seed(5)
    metrics = model.training_step(v, 0, {"main": torch.optim.SGD(model.parameters(), lr=0.0)})
    for p, w in zip([model.W, model.b, model.c], want, strict=True):
        torch.testing.assert_close(p.grad, w, rtol=1e-5, atol=1e-6)
    assert metrics["loss"] == pytest.approx(float(want_loss.detach()), rel=1e-5)


def test_exact_log_likelihood_is_the_rbms() -> None:
    model = make()
    log_z, method, _ = model.log_z()
    assert method == "exact"
    states = ((torch.arange(64)[:, None] >> torch.arange(6)) & 1).float()
    total = torch.logsumexp(-model.free_energy_graph(states).detach().double(), 0)
    assert log_z == pytest.approx(float(total), rel=1e-5)


def test_centering_and_fast_weights_are_refused() -> None:
    with pytest.raises(ConfigError, match="centering"):
        make("model.centering=true")
    with pytest.raises(ConfigError, match="fpcd"):
        make("model.learning=fpcd")
    with pytest.raises(ConfigError, match="centering=False"):
        EDRBM(n_hidden=4, centering=True, info=INFO)
