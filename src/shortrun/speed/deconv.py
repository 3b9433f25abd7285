"""The ``deconv`` family: the LEBM generator's first and last layers, transposed convolutions
that oneDNN runs slowly, by the convolution (``conv``) or by the product it is:
:class:`LatentProjection` (``1 × 1`` latent to a ``k × k`` map) by ``gemm``,
``z @ W.reshape(c, o·k·k)``; :class:`ImageLayer` (to 1 or 3 channels) by ``fold``, the same
product per input pixel and ``F.fold`` (col2im) to scatter-add the patches, with the
convolution's own backward, so gradients are exactly ``nn.ConvTranspose2d``'s. Gains:
bench/README.md, "Route gains per family". Each layer keeps its choice (timed as forward plus
the input's gradient) per input shape, layout, dtype and threads; off CPU or under autocast it
is the plain convolution.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from shortrun.speed import engine

FAMILY = "deconv"
ROUTES = engine.FAMILIES[FAMILY]
FIXED = "conv"
_UNMEASURED = [0]  # depth of :func:`unmeasured` blocks


@contextlib.contextmanager
def unmeasured() -> Iterator[None]:
    """Layers first called inside this block take ``conv`` without measuring or caching: for
    the layout check's batch-2 copies of a generator (:mod:`shortrun.speed.layout`)."""
    _UNMEASURED[0] += 1
    try:
        yield
    finally:
        _UNMEASURED[0] -= 1


class _FoldTransposedConv(torch.autograd.Function):
    """``conv_transpose2d(x, W, b, stride, padding)`` as a GEMM and a col2im; the backward is
    the convolution's own."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding):
        n, c, h, w = x.shape
        o, kh, kw = weight.shape[1:]
        out_h = (h - 1) * stride[0] - 2 * padding[0] + kh
        out_w = (w - 1) * stride[1] - 2 * padding[1] + kw
        rows = x.permute(0, 2, 3, 1).reshape(n, h * w, c)  # a view when x is NHWC
        cols = torch.matmul(rows, weight.reshape(c, o * kh * kw)).transpose(1, 2)
        y = F.fold(cols, (out_h, out_w), (kh, kw), padding=padding, stride=stride)
        if bias is not None:
            y += bias.view(1, o, 1, 1)
        ctx.save_for_backward(x, weight)
        ctx.conf = (stride, padding, bias is not None)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        stride, padding, has_bias = ctx.conf
        need = ctx.needs_input_grad
        gx, gw, gb = torch.ops.aten.convolution_backward(
            grad, x, weight, [weight.shape[1]] if has_bias else None, list(stride),
            list(padding), [1, 1], True, [0, 0], 1, [need[0], need[1], has_bias and need[2]])
        return gx, gw, gb if has_bias else None, None, None


def fold(layer: nn.ConvTranspose2d, x: torch.Tensor) -> torch.Tensor:
    """The ``fold`` route of ``layer(x)``."""
    return _FoldTransposedConv.apply(x, layer.weight, layer.bias, layer.stride, layer.padding)


def gemm(layer: nn.ConvTranspose2d, z: torch.Tensor) -> torch.Tensor:
    """The ``gemm`` route of ``layer(z)`` for a ``1 × 1`` input and no padding:
    ``out[b, o, i, j] = Σ_c z[b, c] W[c, o, i, j] + bias[o]``, one product, the output in the
    weight's layout (NHWC when the generator runs channels-last)."""
    n, (c, o, kh, kw) = z.shape[0], layer.weight.shape
    w = layer.weight
    channels_last = not w.is_contiguous() and w.is_contiguous(memory_format=torch.channels_last)
    if channels_last:  # columns ordered (i, j, o): the output is NHWC
        cols = w.permute(0, 2, 3, 1).reshape(c, kh * kw * o)
        bias = None if layer.bias is None else layer.bias.repeat(kh * kw)
    else:  # columns ordered (o, i, j): the output is NCHW
        cols = w.reshape(c, o * kh * kw)
        bias = None if layer.bias is None else layer.bias.repeat_interleave(kh * kw)
    z2 = z.reshape(n, c)
    out = z2 @ cols if bias is None else torch.addmm(bias, z2, cols)
    if channels_last:
        return out.view(n, kh, kw, o).permute(0, 3, 1, 2)
    return out.view(n, o, kh, kw)


def conv(layer: nn.ConvTranspose2d, x: torch.Tensor) -> torch.Tensor:
    """The ``conv`` route: the transposed convolution itself (oneDNN on CPU)."""
    return nn.ConvTranspose2d.forward(layer, x)


IMPLS = {"conv": conv, "fold": fold, "gemm": gemm}


def applies(layer: RoutedTransposedConv, x: torch.Tensor) -> bool:
    """Whether the layer's product route computes this call: CPU, float32/64, no autocast, 4-D
    input, no groups, dilation or output padding; for ``gemm`` a ``1 × 1`` input and no
    padding."""
    common = (x.dim() == 4 and x.device.type == "cpu"
              and x.dtype in (torch.float32, torch.float64)
              and not torch.is_autocast_enabled("cpu") and layer.groups == 1
              and layer.dilation == (1, 1) and layer.output_padding == (0, 0)
              and layer.padding_mode == "zeros")
    if layer.FAST == "gemm":
        return common and x.shape[2:] == (1, 1) and layer.padding == (0, 0)
    return common


def _forward_and_grad(impl, layer: nn.ConvTranspose2d, x: torch.Tensor):
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        y = impl(layer, x)
        (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
    return y.detach(), g


def _layout(t: torch.Tensor) -> str:
    return ("nhwc" if t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()
            else "nchw")


class Deconv(engine.Family):
    """The ``deconv`` family: a generator's first or last layer by the convolution or by the
    product it is (module docstring); each layer keeps its choice per shape."""

    name, routes, impls = FAMILY, engine.FAMILIES[FAMILY], IMPLS

    def candidates(self, layer, x) -> list[str]:
        return ["conv", layer.FAST] if applies(layer, x) else ["conv"]

    def fixed(self, layer, x) -> str:
        return FIXED

    def key(self, layer, x) -> str | None:
        """``deconv|dtype|threads=N|batch=B (bucket)|c x o x k, stride, in h x w|layout``."""
        if _UNMEASURED[0]:
            return None
        layout = _layout(x if x.shape[2:] != (1, 1) else layer.weight)  # 1 × 1 is both
        return (f"{FAMILY}|{str(x.dtype).removeprefix('torch.')}|"
                f"threads={torch.get_num_threads()}|batch={engine.bucket(x.shape[0])}|"
                f"{layer.in_channels}x{layer.out_channels}x{layer.kernel_size[0]}"
                f"s{layer.stride[0]}|in{x.shape[2]}x{x.shape[3]}|{layout}")

    def check_key(self, route, layer, x):
        return (layer.FAST, layer.in_channels, layer.out_channels, layer.kernel_size,
                layer.stride, layer.padding, layer.bias is not None)

    def cross_check(self, route, layer, x) -> bool:
        """The product route and the convolution agree on the output and on every gradient,
        in NCHW and NHWC, in float64."""
        if route == "conv":
            return True
        with torch.enable_grad():  # the first call may come under no_grad (a draw)
            return _cross_check(layer)

    def trial(self, route, layer, x):
        probe = x.detach().clone(memory_format=torch.preserve_format)
        return lambda: _forward_and_grad(IMPLS[route], layer, probe)


DECONV = Deconv()


def _cross_check(layer: RoutedTransposedConv) -> bool:
    g = torch.Generator().manual_seed(0)
    twin = nn.ConvTranspose2d(layer.in_channels, layer.out_channels, layer.kernel_size,
                              layer.stride, layer.padding, bias=layer.bias is not None)
    twin = twin.double()
    with torch.no_grad():
        for p in twin.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
    size = (1, 1) if layer.FAST == "gemm" else (5, 4)
    x = torch.randn(2, layer.in_channels, *size, generator=g, dtype=torch.float64)
    fast = IMPLS[layer.FAST]
    for fmt in (torch.contiguous_format, torch.channels_last):
        twin.to(memory_format=fmt)
        xf = x.contiguous(memory_format=fmt)
        got, want = (_forward_and_grad(impl, twin, xf) for impl in (fast, conv))
        seed = torch.randn(got[0].shape, generator=g, dtype=torch.float64)
        grads = []
        for impl in (fast, conv):
            twin.zero_grad()
            (impl(twin, xf) * seed).sum().backward()
            grads.append([p.grad.clone() for p in twin.parameters()])
        pairs = [*zip(got, want, strict=True), *zip(*grads, strict=True)]
        if not all(torch.allclose(a, b, rtol=1e-10, atol=1e-10) for a, b in pairs):
            return False
    return True


class RoutedTransposedConv(nn.ConvTranspose2d):
    """``nn.ConvTranspose2d`` (same parameters, state dict and init) whose CPU forward takes
    the ``deconv`` route: ``conv`` or the subclass's product route :attr:`FAST`."""

    FAST = "conv"

    def forward(self, x: torch.Tensor, output_size: list[int] | None = None) -> torch.Tensor:
        if output_size is not None or not applies(self, x):
            return super().forward(x, output_size)
        key = (tuple(x.shape), x.is_contiguous(), self.weight.is_contiguous(), x.dtype,
               torch.get_num_threads())
        chosen = self.__dict__.setdefault("_routes", {}).get(key)
        if chosen is None:
            chosen = self.__dict__["_routes"][key] = engine.settle(DECONV, self, x)
        return chosen(self, x)


class ImageLayer(RoutedTransposedConv):
    """The generators' last layer, to the image's 1 or 3 channels: ``conv`` or ``fold``."""

    FAST = "fold"


class LatentProjection(RoutedTransposedConv):
    """The generators' first layer, the ``1 × 1`` latent to a ``k × k`` map (stride 1, no
    padding): ``conv`` or ``gemm``."""

    FAST = "gemm"
