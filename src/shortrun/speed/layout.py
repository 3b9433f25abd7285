"""The ``conv`` family: the LEBM generator's memory layout, NCHW or NHWC.

NHWC lets oneDNN pick faster transposed-convolution kernels on some CPUs, but not on every
machine, thread count or batch size (bench/README.md, "Route gains per family"). The generator
takes its layout and never measures: ``model.channels_last: auto`` is settled before the first
chain step (:func:`settle_layouts`) on CPU by timing one posterior-chain step (:func:`chain_step`)
in each layout, after a float64 cross-check (:func:`layout_works`); the fixed route is NHWC.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from shortrun.speed import deconv, engine

FAMILY = "conv"
FORMATS = {"nchw": torch.contiguous_format, "nhwc": torch.channels_last}
FIXED = "nhwc"


def chain_step(net: nn.Module, z: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``∇_z ‖target − net(z)‖² / 2``: the generator's share of one posterior Langevin step."""
    with torch.enable_grad():
        z = z.detach().requires_grad_(True)
        r = target - net(z)
        (grad,) = torch.autograd.grad(0.5 * r.pow(2).sum(), z)
    return grad


def _copy_in(net: nn.Module, layout: str, dtype: torch.dtype) -> nn.Module:
    """A frozen copy of ``net`` in ``layout`` and ``dtype`` (the original is not touched)."""
    twin = copy.deepcopy(net).to(dtype=dtype, memory_format=FORMATS[layout])
    for p in twin.parameters():
        p.requires_grad_(False)
    return twin


def _probe(shape: tuple[int, ...], batch: int, layout: str, dtype: torch.dtype,
           seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(batch, *shape[1:], generator=g, dtype=dtype)
    return z.contiguous(memory_format=FORMATS[layout])


def layout_works(net: nn.Module, z: torch.Tensor, layout: str) -> bool:
    """The float64 cross-check: :func:`chain_step` in ``layout`` and ``z``'s dtype, on two
    latents, agrees with the float64 NCHW step to the dtype's rounding (a kernel error fails it)."""
    zl = _probe(tuple(z.shape), 2, layout, z.dtype, seed=1)
    tol = 1e-4 if z.dtype == torch.float32 else 1e-10
    # the first and last layers' own routes have their own float64 check (deconv); here
    # they run as the convolution, and nothing is timed or cached for these batch-2 copies
    with deconv.unmeasured():
        ref_net = _copy_in(net, "nchw", torch.float64)
        with torch.no_grad():
            target = ref_net(zl.double()).mul_(0.5)  # an image the latents do not make exactly
        ref = chain_step(ref_net, zl.double(), target)
        got = chain_step(_copy_in(net, layout, z.dtype), zl,
                         target.to(z.dtype).contiguous(memory_format=FORMATS[layout]))
    return got.dtype == z.dtype and torch.allclose(
        got.double(), ref, rtol=tol, atol=tol * ref.abs().max().item())


class Layout(engine.Family):
    """The ``conv`` family: ``(net, z, label)`` -> ``nchw`` or ``nhwc`` (module docstring);
    ``label`` names the network in the cache key."""

    name, routes = FAMILY, engine.FAMILIES[FAMILY]
    impls = {name: (lambda *a, name=name: name) for name in FORMATS}

    def candidates(self, net, z, label) -> list[str]:
        return list(FORMATS)

    def fixed(self, net, z, label) -> str:
        return FIXED

    def key(self, net, z, label) -> str | None:
        """``conv|dtype|threads=N|batch=B (power-of-two bucket)|network``."""
        if (z.device.type != "cpu" or torch.is_autocast_enabled("cpu")
                or z.dtype not in (torch.float32, torch.float64)):
            return None
        return (f"{FAMILY}|{str(z.dtype).removeprefix('torch.')}|"
                f"threads={torch.get_num_threads()}|batch={engine.bucket(z.shape[0])}|{label}")

    def check_key(self, route, net, z, label):
        return label, z.dtype, tuple(z.shape[1:])

    def cross_check(self, route, net, z, label) -> bool:
        return layout_works(net, z, route)

    def trial(self, route, net, z, label):
        twin = _copy_in(net, route, z.dtype)
        zl = _probe(tuple(z.shape), z.shape[0], route, z.dtype, seed=2)
        with torch.no_grad():
            target = twin(zl)
        return lambda: chain_step(twin, zl, target)


LAYOUT = Layout()


def settle_layouts(model: nn.Module, batch_size: int) -> None:
    """Hand each generator in ``model`` left at ``auto`` (``layout`` None) its layout for
    ``batch_size`` latents, pinned, cached or measured now (by the Trainer, by loading a run)."""
    for g in [m for m in model.modules() if getattr(m, "layout", "") is None]:
        z = next(g.parameters()).new_zeros(batch_size, g.nz, 1, 1)
        g.set_layout(engine.settle(LAYOUT, g.net, z, f"{g.kind}-nz{g.nz}-ngf{g.ngf}").name)
