"""The ``rbm`` family: the RBM's products outside autograd (``bias + a @ b``) by torch's BLAS,
oneDNN (:mod:`shortrun.speed.onednn`) or NumPy's BLAS on the tensors' memory, each at the
run's threads and at one (``route@1``). Which wins depends on the CPU and the shape
(bench/README.md, "Route gains per family"), so the engine races them. Products that need
autograd, are not float32/float64 on CPU, or run under bf16 autocast take
:func:`fixed_route`. :func:`match_blas_threads` caps NumPy's BLAS pool at torch's thread
count, process-wide, so the two pools do not spin against each other.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from shortrun.speed import engine
from shortrun.speed.onednn import autocast_bf16, onednn_linear, onednn_usable

FAMILY = "rbm"  # the RBM GEMMs
ROUTES = engine.FAMILIES[FAMILY]  # torch, onednn, numpy: the candidates' order

Impl = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]


def _torch(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return a @ b if bias is None else torch.addmm(bias, a, b)


def _onednn(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return onednn_linear(a, b.t(), bias)


def _numpy(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    out = torch.from_numpy(np.matmul(a.numpy(), b.numpy()))
    return out if bias is None else out.add_(bias)


IMPLS: dict[str, Impl] = {"torch": _torch, "onednn": _onednn, "numpy": _numpy}


def _applies(route: str, ts: tuple[torch.Tensor, ...]) -> bool:
    if route == "onednn":
        return onednn_usable(*ts)
    if route == "numpy":
        return all(t.device.type == "cpu" and not t.requires_grad
                   and t.dtype in (torch.float32, torch.float64) and t.dtype == ts[0].dtype
                   for t in ts)
    return True


def fixed_route(*ts: torch.Tensor) -> str:
    """The route when nothing is timed: oneDNN when usable, else NumPy's BLAS when torch runs
    one thread (with more, NumPy's OpenBLAS pool and torch's OpenMP pool spin against each
    other), else torch."""
    if _applies("onednn", ts):
        return "onednn"
    if torch.get_num_threads() == 1 and _applies("numpy", ts):
        return "numpy"
    return "torch"


def _measurable(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> bool:
    # attribute checks only: this runs on every product. Everything the memo key leaves out
    # (grad, device, dtype of the bias) is settled here, so a memoised route always applies.
    return (a.is_cpu and b.is_cpu and not (a.requires_grad or b.requires_grad)
            and a.dtype == b.dtype and a.dtype in (torch.float32, torch.float64)
            and a.dim() == 2 and b.dim() == 2 and not autocast_bf16()
            and (bias is None or (bias.is_cpu and not bias.requires_grad
                                  and bias.dtype == a.dtype)))


def _layout(t: torch.Tensor) -> str:
    return "T" if t.stride(0) == 1 and t.shape[0] > 1 else "N"


def route_key(family: str, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> str:
    """``family|dtype|threads=N|MxKxN (power-of-two buckets)|layouts|bias``: a cache key."""
    (m, k), n = a.shape, b.shape[1]
    dims = "x".join(str(engine.bucket(d)) for d in (m, k, n))
    return (f"{family}|{str(a.dtype).removeprefix('torch.')}|threads={torch.get_num_threads()}"
            f"|{dims}|{_layout(a)}{_layout(b)}|{'bias' if bias is not None else 'nobias'}")


class Products(engine.Family):
    """The ``rbm`` family: ``bias + a @ b`` outside autograd by torch's BLAS, oneDNN or
    NumPy's BLAS, each at the run's threads and at one (``route@1``)."""

    name, routes = FAMILY, engine.FAMILIES[FAMILY]
    impls = engine.with_one_thread(IMPLS)

    def candidates(self, a, b, bias=None) -> list[str]:
        ts = (a, b) if bias is None else (a, b, bias)
        names = [r for r in ROUTES if _applies(r, ts)]
        if torch.get_num_threads() > 1:
            names += [f"{r}@1" for r in names]
        elif "numpy" in names:
            match_blas_threads()  # time NumPy as the Trainer runs it
        return names

    def racers(self, names, *args) -> list[str]:
        # NumPy races only when torch runs one thread: its pool is matched to torch's
        # (match_blas_threads), and two busy pools spin against each other
        many = torch.get_num_threads() > 1
        return [n for n in names if not (many and n.startswith("numpy"))]

    def fixed(self, a, b, bias=None) -> str:
        return fixed_route(*((a, b) if bias is None else (a, b, bias)))

    def key(self, a, b, bias=None) -> str | None:
        return route_key(FAMILY, a, b, bias) if _measurable(a, b, bias) else None

    def check_key(self, route, a, b, bias=None):
        return a.dtype

    def cross_check(self, route, a, b, bias=None) -> bool:
        """A product of transposed views with a bias agrees with float64 to the dtype's
        rounding."""
        dtype = a.dtype
        g = torch.Generator().manual_seed(0)
        x = torch.randn(7, 5, generator=g, dtype=dtype)
        y = torch.randn(6, 5, generator=g, dtype=dtype).t()  # a transposed view, as the RBM
        c = torch.randn(6, generator=g, dtype=dtype)
        ref = x.double() @ y.double() + c.double()
        tol = 1e-5 if dtype == torch.float32 else 1e-12
        out = IMPLS[route](x, y, c)
        return out.dtype == dtype and torch.allclose(out.double(), ref, rtol=tol, atol=tol)


PRODUCTS = Products()


def route_for(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> str:
    """The route name (``onednn``, ``torch@1``, ...) this product takes: pinned, measured, or
    the fixed order for what is not measured."""
    return _chosen(a, b, bias).name


def _chosen(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> engine.Chosen:
    # the hot path: one tuple and a dict lookup per product (small products take microseconds)
    if _measurable(a, b, bias):
        memo_key = (FAMILY, a.dtype, a.shape, b.shape, a.stride(), b.stride(), bias is None,
                    torch.get_num_threads(), torch.backends.mkldnn.enabled)
        return engine.route(PRODUCTS, memo_key, a, b, bias)
    return engine.settle(PRODUCTS, a, b, bias)


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for tensors outside autograd, by the route :func:`route_for` picks.
    Transposed views are fine (no copy on any route)."""
    return _chosen(a, b, None)(a, b, None)


def affine(x: torch.Tensor, W: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``bias + x @ W`` (torch.addmm semantics), by the same routes as :func:`gemm`."""
    return _chosen(x, W, bias)(x, W, bias)


_blas_threads: int | None = None


def match_blas_threads(threads: int | None = None) -> None:
    """Give NumPy's BLAS torch's thread count (``train.threads``), or ``threads``, once per
    change: a process-wide cap (threadpoolctl) on every NumPy BLAS call, as the NumPy routes
    need."""
    global _blas_threads
    n = threads or torch.get_num_threads()
    if n != _blas_threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n, user_api="blas")
        _blas_threads = n
