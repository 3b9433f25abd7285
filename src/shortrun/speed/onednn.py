"""Float32 matrix products through oneDNN on CPU, for the kernels' no-autograd inner loops.

The op is ``mkldnn._linear_pointwise``, private: torch has no public route to oneDNN's fp32
linear on dense tensors (docs/architecture.md, "Departures", item 10). :func:`_pointwise` is the
one place that names it; it is used only after a probe shows it exists and agrees with
``F.linear``, and every family that routes through it cross-checks it in float64 first.
Under CPU bf16 autocast (which does not cast this op) :func:`onednn_linear` casts the factors
to bfloat16 (float32 accumulation) and returns float32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_WORKS: dict[torch.dtype, bool] = {}  # probed once per factor dtype, on first use


def _pointwise(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """``x @ w.T + b`` by oneDNN's linear kernel: the project's only private torch name."""
    return torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "")


def _probe(dtype: torch.dtype) -> bool:
    g = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*s, generator=g) for s in ((5, 3), (4, 3), (4,)))
    xd, wd = x.to(dtype), w.to(dtype)
    bias = b if dtype == torch.float32 else None  # the bf16 route adds the bias in float32
    out = _pointwise(xd, wd, bias)
    out_t = _pointwise(xd, wd.t().contiguous().t(), None)  # a transposed view of the weight
    ref = F.linear(xd.double(), wd.double(), b.double() if bias is not None else None)
    ref_t = xd.double() @ wd.double().t()
    tol = 1e-5 if dtype == torch.float32 else 2e-2  # bf16 rounds its output to 8 bits
    return bool(torch.allclose(out.double(), ref, atol=tol, rtol=tol)
                and torch.allclose(out_t.double(), ref_t, atol=tol, rtol=tol))


def onednn_linear_works(dtype: torch.dtype = torch.float32) -> bool:
    """Whether ``mkldnn._linear_pointwise`` exists here and agrees with ``F.linear`` for
    factors of ``dtype`` (float32, or bfloat16 for the autocast branch)."""
    if dtype not in _WORKS:
        try:
            _WORKS[dtype] = _probe(dtype)
        except Exception:  # a private op may fail in any way (TypeError for a changed
            # signature, RuntimeError for a missing kernel, ...): then it is simply not used
            _WORKS[dtype] = False
    return _WORKS[dtype]


def onednn_usable(*ts: torch.Tensor) -> bool:
    """True when every tensor is a float32 CPU tensor outside autograd and oneDNN is on."""
    return (all(t.device.type == "cpu" and t.dtype == torch.float32 and not t.requires_grad
                for t in ts)
            and torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
            and onednn_linear_works(torch.bfloat16 if autocast_bf16() else torch.float32))


def autocast_bf16() -> bool:
    """True inside ``torch.autocast("cpu", dtype=torch.bfloat16)``."""
    return (torch.is_autocast_enabled("cpu")
            and torch.get_autocast_dtype("cpu") == torch.bfloat16)


def onednn_linear(x: torch.Tensor, w: torch.Tensor,
                  b: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ w.T + b`` through oneDNN; ``x`` and ``w`` may be transposed views (no copy).
    Float32 in, float32 out; the product in bfloat16 under CPU bf16 autocast."""
    if autocast_bf16():
        bf = torch.bfloat16
        out = _pointwise(x.to(bf), w.to(bf), None).float()
        return out.add_(b) if b is not None else out
    return _pointwise(x, w, b)
