"""``shortrun.models.lebm_nets``: the generators' first layer, run as a GEMM
(:class:`LatentProjection`), is the transposed convolution it replaces: same output, same
gradients for the latent, the weight and the bias, in either memory layout, and the output in
the layout the rest of the generator runs in."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from shortrun.models.lebm_nets import Generator, LatentProjection

FORMATS = {"nchw": torch.contiguous_format, "nhwc": torch.channels_last}


def twins(c_in: int, c_out: int, kernel: int, layout: str, dtype=torch.float64):
    torch.manual_seed(0)
    fast = LatentProjection(c_in, c_out, kernel, 1, 0).to(dtype, memory_format=FORMATS[layout])
    conv = nn.ConvTranspose2d(c_in, c_out, kernel, 1, 0).to(dtype,
                                                            memory_format=FORMATS[layout])
    conv.load_state_dict(fast.state_dict())
    return fast, conv


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("kernel", [4, 7])
def test_projection_is_the_transposed_convolution_with_its_gradients(layout, kernel):
    fast, conv = twins(5, 6, kernel, layout)
    z = torch.randn(3, 5, 1, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    outs, grads = [], []
    for net in (fast, conv):
        zi = z.clone().requires_grad_(True)
        out = net(zi)
        seed = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(2))
        (out * seed).sum().backward()
        outs.append(out)
        grads.append([zi.grad, net.weight.grad, net.bias.grad])
    assert outs[0].shape == (3, 6, kernel, kernel)
    assert torch.allclose(outs[0], outs[1], rtol=1e-12, atol=1e-12)
    for a, b in zip(*grads, strict=True):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)
    assert outs[0].is_contiguous(memory_format=FORMATS[layout])


def test_projection_without_bias_and_larger_inputs_take_the_convolution():
    torch.manual_seed(0)
    fast = LatentProjection(4, 3, 4, 1, 0, bias=False).double()
    conv = nn.ConvTranspose2d(4, 3, 4, 1, 0, bias=False).double()
    conv.load_state_dict(fast.state_dict())
    for shape in ((2, 4, 1, 1), (2, 4, 3, 3)):
        z = torch.randn(shape, dtype=torch.float64)
        assert torch.allclose(fast(z), conv(z), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind,shape", [("mnist28", (1, 28, 28)), ("svhn32", (3, 32, 32))])
def test_generators_start_with_the_projection_and_keep_their_keys(kind, shape):
    g = Generator(kind, nz=6, ngf=4, channels_last=False)
    assert isinstance(g.net[0], LatentProjection)
    assert list(g.state_dict())[:2] == ["net.0.weight", "net.0.bias"]
    assert g(torch.randn(2, 6)).shape == (2, *shape)
