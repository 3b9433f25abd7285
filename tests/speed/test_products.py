"""Every CPU route of the no-autograd products (oneDNN, NumPy, torch; pinned or measured, at
the current thread count or one) agrees with float64."""

import pytest
import torch

from shortrun.speed import engine as routes
from shortrun.speed import products
from shortrun.speed.products import affine, gemm, route_for


def _check_against_float64():
    g = torch.Generator().manual_seed(4)
    v = torch.rand(30, 40, generator=g).round()
    W = torch.randn(40, 20, generator=g) * 0.1
    c = torch.randn(20, generator=g)
    h = torch.rand(30, 20, generator=g)
    ref = v.double() @ W.double() + c.double()
    torch.testing.assert_close(affine(v, W, c).double(), ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(affine(h, W.t(), torch.zeros(40)).double(),
                               h.double() @ W.double().t(), rtol=0, atol=1e-5)
    torch.testing.assert_close(gemm(v.t(), h).double(), v.double().t() @ h.double(),
                               rtol=0, atol=1e-5)


@pytest.mark.parametrize("route", ["onednn", "numpy", "torch"])
@pytest.mark.parametrize("onednn", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_pinned_routes_agree_with_float64(route, onednn, threads, mkldnn_enabled, monkeypatch):
    """Each pinned route gives float32 rounding away from the float64 product, for the
    transposed views the Gibbs kernel and the RBM update pass."""
    monkeypatch.setenv("SHORTRUN_ROUTE", route)
    mkldnn_enabled(onednn)
    torch.set_num_threads(threads)
    _check_against_float64()


@pytest.mark.parametrize("winner", ["torch", "onednn", "numpy", "torch@1", "onednn@1"])
@pytest.mark.parametrize("threads", [1, 2])
def test_every_measured_choice_agrees_with_float64(winner, threads, monkeypatch):
    """Whatever the timing picks (a fake timer makes ``winner`` fastest when it is a
    candidate here), the product is the same to float32 rounding."""
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.setattr(routes, "measure", lambda name, fn: 0.0 if name == winner else 1.0)
    torch.set_num_threads(threads)
    _check_against_float64()
    a, b = torch.rand(30, 40), torch.rand(40, 20)
    if winner in _raced(a, b, None):
        assert route_for(a, b) == winner


def _raced(a, b, bias=None):
    """The candidates a race of these tensors would time (applying, checked)."""
    P = products.PRODUCTS
    return [n for n in P.racers(P.candidates(a, b, bias), a, b, bias)
            if routes.passes(P, n, a, b, bias)]


def test_float64_and_autograd_inputs_take_the_plain_route():
    g = torch.Generator().manual_seed(5)
    a = torch.randn(6, 4, generator=g, dtype=torch.float64)
    b = torch.randn(4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    out = gemm(a, b)
    assert out.requires_grad and torch.allclose(out, a @ b)


def test_a_bias_that_needs_autograd_is_never_given_a_memoised_fast_route(monkeypatch):
    monkeypatch.delenv("SHORTRUN_ROUTE")
    a, b, c = torch.rand(8, 5), torch.rand(5, 3), torch.rand(3)
    route_for(a, b, c)  # memoised for these shapes
    c.requires_grad_(True)
    assert route_for(a, b, c) == "torch" and affine(a, b, c).requires_grad


def test_the_onednn_pin_is_the_old_fixed_order(mkldnn_enabled):
    """The tests' pin (conftest) reproduces the route of before measurement: oneDNN when
    usable, NumPy at one thread without it, torch at two."""
    a, b = torch.rand(8, 5), torch.rand(5, 3)
    assert route_for(a, b) == products.fixed_route(a, b)
    mkldnn_enabled(False)
    assert route_for(a, b) == "numpy"
    torch.set_num_threads(2)
    assert route_for(a, b) == "torch"
    assert route_for(a.double(), b.double()) == "torch"


def test_a_route_failing_its_float64_check_is_never_a_candidate(monkeypatch):
    monkeypatch.setitem(products.IMPLS, "numpy", lambda a, b, bias: (a @ b) * 1.001)
    monkeypatch.setattr(routes, "_checked", {})
    a, b = torch.rand(8, 5), torch.rand(5, 3)
    assert not routes.passes(products.PRODUCTS, "numpy", a, b, None)
    assert "numpy" not in _raced(a, b, None)
    assert routes.passes(products.PRODUCTS, "torch", a, b, None)


def test_small_products_are_also_timed_on_one_thread():
    """At two threads each route is a candidate at two and at one thread (issue 16, item 4);
    NumPy only at one thread, where its pool does not fight torch's."""
    torch.set_num_threads(2)
    a, b = torch.rand(100, 64), torch.rand(64, 20)
    cands = _raced(a, b, None)
    assert {"torch", "torch@1"} <= set(cands) and "numpy" not in cands
    torch.set_num_threads(1)
    assert "torch@1" not in _raced(a, b, None)


def test_the_one_thread_route_restores_the_thread_count(monkeypatch):
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.setattr(routes, "measure", lambda name, fn: 0.0 if name == "torch@1" else 1.0)
    torch.set_num_threads(2)
    a, b = torch.rand(100, 64), torch.rand(64, 20)
    assert route_for(a, b) == "torch@1"
    torch.testing.assert_close(gemm(a, b), a @ b)
    assert torch.get_num_threads() == 2
