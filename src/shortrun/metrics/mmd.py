"""Maximum mean discrepancy between two samples (Gretton et al. 2012, JMLR, Eq. 3).

``MMD²(P, Q) = E k(x, x') + E k(y, y') − 2 E k(x, y)`` with a sum of Gaussian kernels
``k(a, b) = Σ_σ exp(−‖a − b‖² / (2σ²))``. The unbiased U-statistic drops the diagonal
terms, so it can be slightly negative when P = Q; it is zero in expectation there.
"""

from __future__ import annotations

import torch

DEFAULT_BANDWIDTHS = (0.1, 0.2, 0.5, 1.0, 2.0)


def _kernel_sum(a: torch.Tensor, b: torch.Tensor, bandwidths: tuple[float, ...]) -> torch.Tensor:
    d2 = torch.cdist(a, b).pow(2)
    return sum(torch.exp(-d2 / (2 * s**2)) for s in bandwidths)


@torch.no_grad()
def mmd2(x: torch.Tensor, y: torch.Tensor,
         bandwidths: tuple[float, ...] = DEFAULT_BANDWIDTHS) -> float:
    """Unbiased MMD² between samples ``x`` (n, d) and ``y`` (m, d), n, m ≥ 2."""
    x, y = x.flatten(1).double(), y.flatten(1).double()
    n, m = len(x), len(y)
    if n < 2 or m < 2:
        raise ValueError(f"MMD needs at least 2 points on each side; got {n} and {m}")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"MMD samples differ in dimension: {x.shape[1]} vs {y.shape[1]}")
    if not bandwidths or min(bandwidths) <= 0:
        raise ValueError(f"MMD bandwidths must be positive; got {bandwidths}")
    kxx = _kernel_sum(x, x, bandwidths)
    kyy = _kernel_sum(y, y, bandwidths)
    kxy = _kernel_sum(x, y, bandwidths)
    k = len(bandwidths)
    term_x = (kxx.sum() - k * n) / (n * (n - 1))
    term_y = (kyy.sum() - k * m) / (m * (m - 1))
    return float(term_x + term_y - 2 * kxy.mean())
