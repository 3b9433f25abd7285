"""``shortrun.speed.deconv``: the generator's last layer as a GEMM and a col2im computes the
transposed convolution, with the convolution's own gradients, in either layout; the route is
timed once per key (also when the first call comes under ``no_grad``), and pins and autocast
put it on the plain convolution."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from shortrun.models.lebm_nets import Generator
from shortrun.speed import deconv as fr
from shortrun.speed import engine as routes

FORMATS = {"nchw": torch.contiguous_format, "nhwc": torch.channels_last}


def layers(c: int, o: int, bias: bool = True):
    torch.manual_seed(0)
    fast = fr.ImageLayer(c, o, 4, 2, 1, bias=bias).double()
    plain = nn.ConvTranspose2d(c, o, 4, 2, 1, bias=bias).double()
    plain.load_state_dict(fast.state_dict())
    return fast, plain


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("c,o,bias", [(6, 1, True), (5, 3, True), (4, 2, False)])
def test_fold_is_the_transposed_convolution_with_its_gradients(layout, c, o, bias):
    fast, plain = layers(c, o, bias)
    x = torch.randn(3, c, 5, 4, dtype=torch.float64).contiguous(memory_format=FORMATS[layout])
    seed = torch.randn(3, o, 10, 8, dtype=torch.float64)
    got = []
    for impl, layer in ((fr.fold, fast), (fr.conv, plain)):
        xi = x.clone().requires_grad_(True)
        y = impl(layer, xi)
        (y * seed).sum().backward()
        got.append([y, xi.grad, *(p.grad for p in layer.parameters())])
    assert got[0][0].shape == (3, o, 10, 8)
    for a, b in zip(*got, strict=True):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.fixture
def unpinned(monkeypatch):
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.delenv("SHORTRUN_ROUTE_DECONV", raising=False)


@pytest.mark.parametrize("winner", ["conv", "fold"])
def test_timed_once_per_key_even_when_first_called_under_no_grad(winner, unpinned,
                                                                 monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(routes, "measure", lambda name, fn: (calls.append(name), fn(),
                                                             0.0 if name == winner else 1.0)[2])
    monkeypatch.setattr(routes, "_checked", {})  # the cross-check runs again, under no_grad
    layer = fr.ImageLayer(4, 1, 4, 2, 1)
    x = torch.randn(2, 4, 5, 5)
    before = torch.get_rng_state()
    with torch.no_grad():
        layer(x)
    assert torch.equal(torch.get_rng_state(), before)  # the chains' random stream is untouched
    [chosen] = layer.__dict__["_routes"].values()
    assert chosen.name == winner
    assert sorted(calls) == sorted(["conv", "fold"] * routes.ROUNDS)
    layer(x)
    assert len(calls) == 2 * routes.ROUNDS  # remembered
    [key] = [k for k in routes.remembered() if k.startswith("deconv|")]
    assert key == "deconv|float32|threads=1|batch=2|4x1x4s2|in5x5|nchw"


@pytest.mark.parametrize("pin", ["conv", "fold"])
def test_a_pin_is_used_without_timing(pin, unpinned, monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE_DECONV", pin)
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("timed a pinned route"))
    layer = fr.ImageLayer(4, 1, 4, 2, 1)
    layer(torch.randn(2, 4, 5, 5))
    assert [c.name for c in layer.__dict__["_routes"].values()] == [pin]


def test_autocast_and_other_families_pins_take_the_convolution(monkeypatch):
    layer = fr.ImageLayer(4, 1, 4, 2, 1)
    x = torch.randn(2, 4, 5, 5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not fr.applies(layer, x)
    monkeypatch.setenv("SHORTRUN_ROUTE", "torch")  # the tests' global pin names no deconv route
    assert routes.settle(fr.DECONV, layer, x).name == "conv"


@pytest.mark.parametrize("kind", ["mnist28", "svhn32", "celeba64"])
def test_generators_end_with_the_routed_layer_and_keep_their_keys(kind):
    g = Generator(kind, nz=6, ngf=4, channels_last=False)
    last = g.net[-2]
    assert isinstance(last, fr.ImageLayer) and isinstance(last, nn.ConvTranspose2d)
    assert [n for n, _ in last.named_parameters()] == ["weight", "bias"]  # checkpoints load


def test_the_first_layer_times_conv_against_gemm_and_takes_only_its_own_pin(unpinned,
                                                                           monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(routes, "measure", lambda name, fn: (calls.append(name), fn(),
                                                             0.0 if name == "gemm" else 1.0)[2])
    layer = fr.LatentProjection(4, 6, 4, 1, 0)
    z = torch.randn(2, 4, 1, 1)
    layer(z)
    assert sorted(set(calls)) == ["conv", "gemm"]
    assert [c.name for c in layer.__dict__["_routes"].values()] == ["gemm"]
    for pin, want in (("fold", "conv"), ("gemm", "gemm")):
        monkeypatch.setenv("SHORTRUN_ROUTE_DECONV", pin)
        assert routes.settle(fr.DECONV, layer, z).name == want
