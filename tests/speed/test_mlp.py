"""The routes of ``MLPEnergy``'s fast pass (``mlp`` family): whichever the timing picks, or a
pin names, gives float64's numbers to float32 rounding; pins skip the timing; keys separate
what a choice depends on."""

from __future__ import annotations

import pytest
import torch

from shortrun.energies import MLPEnergy
from shortrun.errors import ConfigError
from shortrun.speed import engine as routes
from shortrun.speed import mlp
from shortrun.speed.onednn import onednn_usable


def _raced(energy, flat):
    """The candidates a race of these rows would time (applying, checked)."""
    return [n for n in mlp.MLP_PASS.candidates(energy, flat)
            if routes.passes(mlp.MLP_PASS, n, energy, flat)]


def _check_against_float64(energy: MLPEnergy, n: int = 300) -> None:
    x = 2 * torch.randn(n, 2, generator=torch.Generator().manual_seed(2))
    e, g = energy.energy_and_grad(x)
    ref = MLPEnergy(2, 32, 2).double()
    ref.load_state_dict({k: v.double() for k, v in energy.state_dict().items()})
    xd = x.double().requires_grad_(True)
    e_ref = ref(xd)
    (g_ref,) = torch.autograd.grad(e_ref.sum(), xd)
    scale = g_ref.abs().max().item()
    torch.testing.assert_close(e.double(), e_ref.detach(), rtol=1e-5,
                               atol=1e-5 * e_ref.abs().max().item())
    torch.testing.assert_close(g.double(), g_ref, rtol=1e-4, atol=1e-5 * scale)


def _energy() -> MLPEnergy:
    torch.manual_seed(0)
    return MLPEnergy(2, 32, 2)


@pytest.mark.parametrize("winner", ["torch", "onednn", "torch@1", "onednn@1"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [7, 300])
def test_every_measured_choice_agrees_with_float64(winner, threads, n, monkeypatch):
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.delenv("SHORTRUN_ROUTE_MLP", raising=False)
    monkeypatch.setattr(routes, "measure", lambda name, fn: 0.0 if name == winner else 1.0)
    torch.set_num_threads(threads)
    energy = _energy()
    _check_against_float64(energy, n)
    flat = torch.zeros(n, 2)
    if winner in _raced(energy, flat):
        assert mlp.route_for(energy, flat).name == winner


@pytest.mark.parametrize("pin", ["torch", "onednn"])
def test_a_pin_skips_the_timing_and_agrees_with_float64(pin, monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE_MLP", pin)
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("timed"))
    energy = _energy()
    _check_against_float64(energy)
    assert mlp.route_for(energy, torch.zeros(300, 2)).name == {"torch": "torch",
                                                               "onednn": "fixed"}[pin]


def test_the_onednn_pin_is_the_rule_before_measurement(monkeypatch):
    """The test suite's pin (tests/conftest.py) keeps the recorded fingerprints: oneDNN from
    256 rows, F.linear below; the same numbers as calling the pass with that rule."""
    energy = _energy()
    for n in (255, 256):
        x = torch.randn(n, 2, generator=torch.Generator().manual_seed(n))
        e, g = energy.energy_and_grad(x)
        e2, g2 = energy.pass_with(x, mlp._use_onednn(x))
        assert torch.equal(e, e2) and torch.equal(g, g2)


def test_the_fastest_pass_wins_and_is_cached(monkeypatch):
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.delenv("SHORTRUN_ROUTE_MLP", raising=False)
    times = {"torch": 2.0, "onednn": 1.0}
    calls: list[str] = []
    monkeypatch.setattr(routes, "measure",
                        lambda name, fn: (calls.append(name), fn(), times[name])[2])
    energy, x = _energy(), torch.randn(500, 2)
    energy.energy_and_grad(x)
    expect = "onednn" if "onednn" in _raced(energy, x) else "torch"
    key = mlp.MLP_PASS.key(energy, x)
    assert key == "mlp|float32|threads=1|rows=512|2x32x32"
    assert routes.remembered()[key]["name"] == expect
    energy.energy_and_grad(torch.randn(400, 2))  # the same bucket: not timed again
    assert len(calls) == len(_raced(energy, x)) * routes.ROUNDS


def test_every_route_passes_the_cross_check_here():
    energy, x = _energy(), torch.zeros(3, 2)
    assert routes.passes(mlp.MLP_PASS, "torch", energy, x)
    assert routes.passes(mlp.MLP_PASS, "torch", energy.double(), x.double())
    if onednn_usable(x):
        assert routes.passes(mlp.MLP_PASS, "onednn", _energy(), x)


def test_a_wrong_pass_fails_the_cross_check(monkeypatch):
    monkeypatch.setitem(mlp.MLP_PASS.impls, "onednn",
                        lambda e, x: tuple(t * 1.001 for t in e.pass_with(x, True)))
    monkeypatch.setattr(routes, "_checked", {})
    assert not routes.passes(mlp.MLP_PASS, "onednn", _energy(), torch.zeros(3, 2))


def test_a_bad_family_pin_names_the_fix(monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE_MLP", "nhwc")
    with pytest.raises(ConfigError, match=r"^SHORTRUN_ROUTE_MLP=nhwc is not a mlp route; use "
                                          r"one of torch, onednn, or unset it"):
        _energy().energy_and_grad(torch.zeros(3, 2))
