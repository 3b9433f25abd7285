"""``shortrun.models.lebm_nets``: the generators' first layer (:class:`LatentProjection`) has a
``gemm`` route that is the transposed convolution it replaces: same output, same gradients for
the latent, the weight and the bias, in either memory layout, and the output in the layout the
rest of the generator runs in. Its routing is tested with the last layer's in
tests/speed/test_deconv.py."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from shortrun.models.lebm_nets import Generator, LatentProjection
from shortrun.speed import deconv as fr

FORMATS = {"nchw": torch.contiguous_format, "nhwc": torch.channels_last}


def twins(c_in: int, c_out: int, kernel: int, layout: str, bias: bool = True):
    torch.manual_seed(0)
    fast = LatentProjection(c_in, c_out, kernel, 1, 0, bias=bias).to(
        torch.float64, memory_format=FORMATS[layout])
    conv = nn.ConvTranspose2d(c_in, c_out, kernel, 1, 0, bias=bias).to(
        torch.float64, memory_format=FORMATS[layout])
    conv.load_state_dict(fast.state_dict())
    return fast, conv


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("kernel,bias", [(4, True), (7, True), (4, False)])
def test_gemm_is_the_transposed_convolution_with_its_gradients(layout, kernel, bias):
    fast, conv = twins(5, 6, kernel, layout, bias)
    z = torch.randn(3, 5, 1, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    outs, grads = [], []
    for impl, net in ((fr.gemm, fast), (fr.conv, conv)):
        zi = z.clone().requires_grad_(True)
        out = impl(net, zi)
        seed = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(2))
        (out * seed).sum().backward()
        outs.append(out)
        grads.append([zi.grad, *(p.grad for p in net.parameters())])
    assert outs[0].shape == (3, 6, kernel, kernel)
    assert torch.allclose(outs[0], outs[1], rtol=1e-12, atol=1e-12)
    for a, b in zip(*grads, strict=True):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)
    assert outs[0].is_contiguous(memory_format=FORMATS[layout])


def test_the_gemm_route_passes_its_cross_check_and_needs_a_1x1_input():
    fast, _ = twins(4, 3, 4, "nchw")
    assert fr._cross_check(fast)
    assert fr.applies(fast.float(), torch.randn(2, 4, 1, 1))
    assert not fr.applies(fast.float(), torch.randn(2, 4, 3, 3))


@pytest.mark.parametrize("kind,shape", [("mnist28", (1, 28, 28)), ("svhn32", (3, 32, 32))])
def test_generators_start_with_the_projection_and_keep_their_keys(kind, shape):
    g = Generator(kind, nz=6, ngf=4, channels_last=False)
    assert isinstance(g.net[0], LatentProjection)
    assert list(g.state_dict())[:2] == ["net.0.weight", "net.0.bias"]
    assert g(torch.randn(2, 6)).shape == (2, *shape)
