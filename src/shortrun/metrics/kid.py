"""Kernel Inception Distance: unbiased MMD² with the cubic polynomial kernel.

Bińkowski et al. 2018, "Demystifying MMD GANs", eq. (4) (the unbiased estimator of
Gretton et al. 2012, Lemma 6) with ``k(x, y) = (xᵀy / d + 1)³``, averaged over random subsets
drawn without replacement, as in their reference code. Unlike the Fréchet distance the
estimator is unbiased, so its expectation is zero for two samples of one distribution and
values at different ``n`` compare; the subset standard deviation is reported beside it.
"""

from __future__ import annotations

import numpy as np
import torch

from shortrun.errors import ConfigError
from shortrun.metrics.frechet import as_features


def polynomial_kernel(x: np.ndarray | torch.Tensor, y: np.ndarray | torch.Tensor) -> np.ndarray:
    """``k(x, y) = (xᵀy / d + 1)³`` for every pair of rows (float64)."""
    return _kernel(_t(x), _t(y)).numpy()


def _t(x: np.ndarray | torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(x, dtype=torch.float64)


def _kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # torch rather than numpy: its matmul behaves on a shared, oversubscribed CPU where
    # OpenBLAS's thread pool can be ~10× slower for these small products.
    return (x @ y.T / x.shape[1] + 1.0) ** 3


def mmd2_unbiased(x: np.ndarray | torch.Tensor, y: np.ndarray | torch.Tensor) -> float:
    """Unbiased MMD² between equal-size samples ``x`` and ``y`` (diagonals excluded)."""
    x, y = _t(x), _t(y)
    m = x.shape[0]
    k_xx, k_yy, k_xy = _kernel(x, x), _kernel(y, y), _kernel(x, y)
    off = m * (m - 1)
    return float((k_xx.sum() - k_xx.diagonal().sum()) / off
                 + (k_yy.sum() - k_yy.diagonal().sum()) / off - 2.0 * k_xy.mean())


def kid(feats_a: np.ndarray | torch.Tensor, feats_b: np.ndarray | torch.Tensor,
        n_subsets: int = 100, subset_size: int = 1000, seed: int = 0) -> tuple[float, float]:
    """``(mean, std)`` of the unbiased MMD² over ``n_subsets`` random subsets of each set.

    ``subset_size`` is capped at the smaller set; at least 2 vectors per set are needed."""
    a = as_features(feats_a, "KID features (first set)")
    b = as_features(feats_b, "KID features (second set)")
    if a.shape[1] != b.shape[1]:
        raise ConfigError(f"KID: feature sizes differ ({a.shape[1]} vs {b.shape[1]}); use the "
                          "same extractor for both sets")
    if n_subsets < 1 or subset_size < 2:
        raise ConfigError(f"KID: n_subsets must be ≥ 1 and subset_size ≥ 2; got {n_subsets} "
                          f"and {subset_size}")
    size = min(subset_size, a.shape[0], b.shape[0])
    rng = np.random.default_rng(seed)
    ta, tb = _t(a), _t(b)
    values = np.array([mmd2_unbiased(ta[rng.choice(a.shape[0], size, replace=False)],
                                     tb[rng.choice(b.shape[0], size, replace=False)])
                       for _ in range(n_subsets)])
    return float(values.mean()), float(values.std(ddof=1) if n_subsets > 1 else 0.0)
