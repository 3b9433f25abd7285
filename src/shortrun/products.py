"""Matrix products outside autograd, routed to the fastest CPU implementation that applies.

The RBM's block-Gibbs kernel and its closed-form update spend their time in skinny products
(batch 100 × 784 × 500 and the like). On CPU, float32, oneDNN's JIT kernels
(:mod:`shortrun.onednn`) run them about 2× torch's BLAS on the benchmark machine; without
oneDNN, NumPy's BLAS single-threaded is about 1.1× torch's (bench/results_rbm.md). Every route
computes the same product in a different summation order; ``tests/test_products.py`` checks
each against float64.

Side effect, process-wide: :func:`match_blas_threads` caps NumPy's BLAS thread pool (through
threadpoolctl) at torch's thread count, so the two pools do not spin against each other.
"""

from __future__ import annotations

import numpy as np
import torch

from shortrun.onednn import onednn_linear, onednn_usable


def _numpy_gemm_ok(*ts: torch.Tensor) -> bool:
    # Single-threaded only: with more threads, NumPy's OpenBLAS pool and torch's OpenMP pool
    # spin against each other (measured 6× slower on 2 shared cores, bench/results_rbm.md).
    return torch.get_num_threads() == 1 and all(t.device.type == "cpu" and not t.requires_grad
               and t.dtype in (torch.float32, torch.float64) and t.dtype == ts[0].dtype
               for t in ts)


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for tensors outside autograd, through the fastest CPU route that applies:
    oneDNN for float32 (:mod:`shortrun.onednn`; about 2× torch's BLAS on the RBM's skinny
    products on the benchmark machine, bench/results_rbm.md), else NumPy's BLAS single-threaded
    (1.1× torch's there; the tensors share memory), else torch. Transposed views are fine."""
    if onednn_usable(a, b):
        return onednn_linear(a, b.t())
    if _numpy_gemm_ok(a, b):
        return torch.from_numpy(np.matmul(a.numpy(), b.numpy()))
    return a @ b


def affine(x: torch.Tensor, W: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``bias + x @ W`` (torch.addmm semantics), by the same routes as :func:`gemm`."""
    if onednn_usable(x, W, bias):
        return onednn_linear(x, W.t(), bias)
    if _numpy_gemm_ok(x, W, bias):
        return gemm(x, W).add_(bias)
    return torch.addmm(bias, x, W)


_blas_threads: int | None = None


def match_blas_threads() -> None:
    """Give NumPy's BLAS the thread count torch uses (``train.threads``), once per change.

    A process-wide side effect (threadpoolctl): every NumPy BLAS call in the process is capped
    afterwards, which is what the single-threaded NumPy route of :func:`gemm` needs."""
    global _blas_threads
    n = torch.get_num_threads()
    if n != _blas_threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n, user_api="blas")
        _blas_threads = n
