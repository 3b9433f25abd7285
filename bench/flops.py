"""FLOPs of one call, counted by :mod:`torch.utils.flop_counter` on the graph that call runs.

``FlopCounterMode`` itself installs a module tracker whose backward hooks break
``torch.autograd.grad`` on leaf tensors (every Langevin chain step does that), so
:class:`GraphFlops` keeps its dispatch mode and formula table and drops only the tracker: every
FLOP is attributed to "Global". oneDNN's linear (``mkldnn._linear_pointwise``, the op
shortrun's MLP pass may take) has no formula in torch's table, so one is added (2·M·N·K,
the same as ``mm``). Ops that look like products but have no formula are listed in
:attr:`GraphFlops.uncounted`, so a report can say its count is a lower bound.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

import torch
from torch.utils.flop_counter import FlopCounterMode, _FlopCounterMode

PRODUCT_HINTS = ("mm", "conv", "linear", "matmul", "addmm", "baddbmm")


def _linear_pointwise_flop(x_shape, w_shape, *args, out_shape=None, **kwargs) -> int:
    """``x (…, K) @ w (N, K).T``: 2·(rows of x)·N·K."""
    return 2 * prod(x_shape[:-1]) * w_shape[0] * x_shape[-1]


class _NoModules:
    """Stands in for the module tracker: no hooks, every op counted under "Global"."""

    parents = {"Global"}

    def __enter__(self) -> _NoModules:
        return self

    def __exit__(self, *args: object) -> None:
        return None


class _Mode(_FlopCounterMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        packet = getattr(func, "_overloadpacket", None)
        name = str(packet)
        if (packet is not None and packet not in self.counter.flop_registry
                and any(h in name.split(".")[-1] for h in PRODUCT_HINTS)):
            self.counter.uncounted.add(name)
        return super().__torch_dispatch__(func, types, args, kwargs)


class GraphFlops(FlopCounterMode):
    """``with GraphFlops() as f: fn()`` then ``f.get_total_flops()``; ``f.uncounted`` names the
    product-like ops it could not count."""

    def __init__(self) -> None:
        mapping = {}
        op = getattr(torch.ops.mkldnn, "_linear_pointwise", None)
        if op is not None:
            mapping[op] = _linear_pointwise_flop
        super().__init__(display=False, custom_mapping=mapping)
        self.mod_tracker = _NoModules()  # type: ignore[assignment]
        self.uncounted: set[str] = set()

    def __enter__(self) -> GraphFlops:
        self.flop_counts.clear()
        self.mode = _Mode(self)
        self.mode.__enter__()
        return self


def count_flops(fn: Callable[[], object]) -> tuple[int, set[str]]:
    """FLOPs of ``fn()`` as it runs, and the product-like ops left uncounted."""
    with GraphFlops() as counter:
        fn()
    return counter.get_total_flops(), counter.uncounted
