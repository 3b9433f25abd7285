"""Normalised Gaussian base densities for annealed importance sampling: a known log-density and an
exact sampler (the two things :func:`~shortrun.estimators.annealing.ais_chains` asks of a base).

:meth:`GaussianBase.fit` fits a Gaussian to data (full covariance, shrunk towards its diagonal so
it stays positive definite in high dimension; Ledoit & Wolf 2004 use the same convex form), the
start Neal (2001, §6) and Salakhutdinov & Murray (2008, Eq. 14-15) recommend: the closer the
base is to the target, the smaller the variance of the weights.
"""

from __future__ import annotations

import math

import torch

LOG_2PI = math.log(2 * math.pi)


class GaussianBase:
    """``N(mean, L Lᵀ)`` over tensors of shape ``(B, *shape)`` (flattened internally)."""

    def __init__(self, mean: torch.Tensor, scale_tril: torch.Tensor | None = None,
                 std: torch.Tensor | float | None = None, shape: tuple[int, ...] | None = None):
        self.mean = mean.reshape(-1)
        self.shape = tuple(shape) if shape is not None else tuple(mean.shape)
        d = self.mean.numel()
        if scale_tril is None:
            std_t = torch.as_tensor(1.0 if std is None else std, dtype=self.mean.dtype)
            self.std = std_t.expand(d).to(self.mean.device).clone()
            if not bool((self.std > 0).all()):
                raise ValueError("GaussianBase: std must be > 0 everywhere")
            self.tril = None
            self.log_det = float(self.std.log().sum())
        else:
            if scale_tril.shape != (d, d):
                raise ValueError(f"GaussianBase: scale_tril must be ({d}, {d}); got "
                                 f"{tuple(scale_tril.shape)}")
            self.tril, self.std = scale_tril, None
            self.log_det = float(scale_tril.diagonal().log().sum())

    @classmethod
    def standard(cls, shape: tuple[int, ...], std: float = 1.0,
                 dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> GaussianBase:
        """``N(0, std² I)`` over ``shape``."""
        return cls(torch.zeros(shape, dtype=dtype, device=device), std=std, shape=shape)

    @classmethod
    def fit(cls, data: torch.Tensor, shrinkage: float = 0.05, min_var: float = 1e-4,
            diagonal: bool = False) -> GaussianBase:
        """Mean and covariance of ``data`` ``(N, *shape)``; the covariance is
        ``(1 − shrinkage) S + shrinkage diag(S)`` with variances floored at ``min_var``."""
        if data.shape[0] < 2:
            raise ValueError(f"GaussianBase.fit needs at least 2 data points; got "
                             f"{data.shape[0]}")
        if not 0 <= shrinkage <= 1:
            raise ValueError(f"GaussianBase.fit: shrinkage must be in [0, 1]; got {shrinkage}")
        x = data.reshape(data.shape[0], -1).double()
        mean = x.mean(0)
        var = x.var(0).clamp_min(min_var)
        shape = tuple(data.shape[1:])
        if diagonal:
            return cls(mean.to(data.dtype), std=var.sqrt().to(data.dtype), shape=shape)
        xc = x - mean
        cov = (1 - shrinkage) * (xc.t() @ xc) / (x.shape[0] - 1)
        cov.diagonal().copy_(var)  # shrunk off-diagonal, full (floored) variances
        tril = torch.linalg.cholesky(cov)
        return cls(mean.to(data.dtype), scale_tril=tril.to(data.dtype), shape=shape)

    @property
    def dim(self) -> int:
        return self.mean.numel()

    def _whiten(self, x: torch.Tensor) -> torch.Tensor:
        r = x.reshape(x.shape[0], -1) - self.mean
        if self.tril is None:
            return r / self.std
        return torch.linalg.solve_triangular(self.tril, r.t(), upper=False).t()

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """``log N(x; mean, L Lᵀ)`` per row, normalised."""
        u = self._whiten(x)
        return -0.5 * (u * u).sum(1) - self.log_det - 0.5 * self.dim * LOG_2PI

    def unwhiten(self, u: torch.Tensor) -> torch.Tensor:
        """``mean + L u`` for whitened rows ``u`` ``(B, d)``, reshaped to ``(B, *shape)``."""
        x = self.mean + (u * self.std if self.tril is None else u @ self.tril.t())
        return x.reshape(u.shape[0], *self.shape)

    def whitened_energy(self, energy):
        """``u ↦ E(mean + L u)``: the target seen from the base's whitened coordinates, where
        ``∫ exp(−E(x)) dx = |det L| ∫ exp(−E(mean + L u)) du``."""
        return lambda u: energy(self.unwhiten(u))

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        return self.unwhiten(torch.randn((n, self.dim), generator=generator,
                                         dtype=self.mean.dtype, device=self.mean.device))
