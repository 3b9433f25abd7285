"""Fréchet distance between Gaussians fitted to two feature sets (the "FID" formula).

Heusel et al. 2017, "GANs Trained by a Two Time-Scale Update Rule Converge to a Local Nash
Equilibrium", eq. (6); the closed form is Dowson & Landau 1982:

    d² = ‖μ₁ − μ₂‖² + Tr(Σ₁ + Σ₂ − 2 (Σ₁^{½} Σ₂ Σ₁^{½})^{½}).

Everything is float64. The trace of the cross term is computed from the eigenvalues of the
symmetric positive semi-definite matrix ``Σ₁^{½} Σ₂ Σ₁^{½}`` (``eigh``, negative round-off
eigenvalues clipped to zero), so it is real by construction; pytorch-fid's ``scipy.linalg.sqrtm``
of the non-symmetric ``Σ₁Σ₂`` needs an imaginary-part check and an ``εI`` offset instead. Both
give the same value when ``Σ₁Σ₂`` is well conditioned (checked in the tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from shortrun.errors import ConfigError


@dataclass(frozen=True)
class FrechetStats:
    """Mean and covariance (float64) of ``n`` feature vectors."""

    mu: np.ndarray
    sigma: np.ndarray
    n: int

    @property
    def dim(self) -> int:
        return int(self.mu.shape[0])


def as_features(feats: np.ndarray | torch.Tensor, what: str = "features") -> np.ndarray:
    """A 2-D float64 numpy array ``(n, d)`` from a numpy array or a torch tensor."""
    if isinstance(feats, torch.Tensor):
        feats = feats.detach().cpu().double().numpy()
    arr = np.asarray(feats, dtype=np.float64)
    if arr.ndim != 2:
        raise ConfigError(f"{what}: expected a 2-D array (n, d) of feature vectors; got shape "
                          f"{tuple(arr.shape)}")
    if arr.shape[0] < 2:
        raise ConfigError(f"{what}: need at least 2 feature vectors for a covariance; got "
                          f"{arr.shape[0]}")
    if not np.isfinite(arr).all():
        raise ConfigError(f"{what}: contains NaN or inf; the samples or the extractor diverged")
    return arr


def frechet_stats(feats: np.ndarray | torch.Tensor) -> FrechetStats:
    """Mean and unbiased covariance (``n − 1``) of ``(n, d)`` features, in float64."""
    arr = torch.from_numpy(as_features(feats))
    mu = arr.mean(0)
    centred = arr - mu
    sigma = centred.T @ centred / (arr.shape[0] - 1)
    return FrechetStats(mu=mu.numpy(), sigma=sigma.numpy(), n=int(arr.shape[0]))


# The linear algebra runs in torch (float64), not numpy: on a shared, oversubscribed CPU the
# OpenBLAS thread pool numpy uses was measured 10-50× slower for these sizes.
def _psd_sqrt(sigma: torch.Tensor) -> torch.Tensor:
    """Symmetric square root of a symmetric PSD matrix via ``eigh``."""
    vals, vecs = torch.linalg.eigh((sigma + sigma.T) / 2)
    return (vecs * vals.clamp_min(0.0).sqrt()) @ vecs.T


def frechet_distance_from_stats(a: FrechetStats, b: FrechetStats) -> float:
    """``d²`` between N(a.mu, a.sigma) and N(b.mu, b.sigma) (the closed form above)."""
    if a.dim != b.dim:
        raise ConfigError(f"Fréchet distance: feature sizes differ ({a.dim} vs {b.dim}); use "
                          "the same extractor for both sets")
    mu_a, mu_b = torch.as_tensor(a.mu, dtype=torch.float64), torch.as_tensor(b.mu,
                                                                            dtype=torch.float64)
    s_a = torch.as_tensor(a.sigma, dtype=torch.float64)
    s_b = torch.as_tensor(b.sigma, dtype=torch.float64)
    diff = mu_a - mu_b
    root_a = _psd_sqrt(s_a)
    cross = root_a @ s_b @ root_a
    eig = torch.linalg.eigvalsh((cross + cross.T) / 2)
    tr_covmean = float(eig.clamp_min(0.0).sqrt().sum())
    value = float(diff @ diff + s_a.trace() + s_b.trace()) - 2.0 * tr_covmean
    # Round-off can push an exact zero (identical sets) a hair below zero.
    return max(value, 0.0)


def frechet_distance(feats_a: np.ndarray | torch.Tensor | FrechetStats,
                     feats_b: np.ndarray | torch.Tensor | FrechetStats) -> float:
    """Fréchet distance between two feature sets ``(n, d)`` (or precomputed stats).

    Report the sample sizes beside the value (``frechet_stats(x).n``): the estimate is biased
    upward by roughly ``Tr Σ / n`` (Chong & Forsyth 2020), so values at different ``n`` do not
    compare."""
    a = feats_a if isinstance(feats_a, FrechetStats) else frechet_stats(feats_a)
    b = feats_b if isinstance(feats_b, FrechetStats) else frechet_stats(feats_b)
    return frechet_distance_from_stats(a, b)
