"""Noise-contrastive estimation (Gutmann & Hyvärinen 2010; JMLR 2012 for the noise ratio ν).

The unnormalised model ``log p_m(x) = −E(x) − c`` carries its own log-normaliser ``c`` (a
learned scalar, which converges to ``log Z``). Data are told apart from ``ν`` times as many
samples of a known noise density ``p_n`` by logistic regression on the log-ratio
(Gutmann & Hyvärinen 2012, Eq. 8-9, our sign):

    G(u) = log p_m(u) − log p_n(u) − log ν = −E(u) − c − log p_n(u) − log ν,
    J = −(1/T_d) [Σ_data log σ(G(x)) + Σ_noise log σ(−G(y))].

Minimising ``J`` over ``(E, c)`` is consistent: at the optimum ``p_m`` equals the data density
(their Theorem 2), so ``c`` estimates ``log Z``. Noise distributions are objects with
``sample(n, generator)`` and ``log_prob(x)``; three standard ones are here (a Gaussian fitted
to the data, a uniform box, and any pair of functions a user gives).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import torch
import torch.nn.functional as F

from shortrun.objectives.contrastive import LossOutput

EnergyFn = Callable[[torch.Tensor], torch.Tensor]


class NoiseDistribution(Protocol):
    """What NCE needs of its noise: draws and their normalised log-density ``(B,)``."""

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor: ...

    def log_prob(self, x: torch.Tensor) -> torch.Tensor: ...


class GaussianNoise:
    """``N(mean, cov)`` over flattened data; :meth:`fit` takes the data's mean and covariance,
    its covariance scaled by ``scale²`` (a noise wider than the data covers its tails)."""

    def __init__(self, mean: torch.Tensor, cov: torch.Tensor, shape: tuple[int, ...] | None = None,
                 ) -> None:
        mean = torch.as_tensor(mean, dtype=torch.float64).reshape(-1)
        cov = torch.as_tensor(cov, dtype=torch.float64)
        d = mean.numel()
        if cov.shape != (d, d):
            raise ValueError(f"GaussianNoise: cov must be ({d}, {d}) for a mean of {d} "
                             f"numbers; got shape {tuple(cov.shape)}")
        try:
            self.chol = torch.linalg.cholesky(cov)
        except RuntimeError as e:
            raise ValueError("GaussianNoise: cov is not positive definite; add a small "
                             "multiple of the identity (GaussianNoise.fit does)") from e
        self.mean, self.shape = mean, tuple(shape) if shape is not None else (d,)
        self.log_norm = 0.5 * d * math.log(2 * math.pi) + float(self.chol.diagonal().log().sum())

    @classmethod
    def fit(cls, x: torch.Tensor, scale: float = 1.0, jitter: float = 1e-4) -> GaussianNoise:
        if x.shape[0] < 2:
            raise ValueError(f"GaussianNoise.fit needs at least 2 examples; got {x.shape[0]}")
        if scale <= 0:
            raise ValueError(f"GaussianNoise.fit: scale must be > 0; got {scale}")
        flat = x.reshape(x.shape[0], -1).double()
        cov = torch.cov(flat.T).reshape(flat.shape[1], flat.shape[1])
        cov = cov * scale**2 + jitter * torch.eye(flat.shape[1], dtype=torch.float64)
        return cls(flat.mean(0), cov, tuple(x.shape[1:]))

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        eps = torch.randn((n, self.mean.numel()), generator=generator, dtype=torch.float64)
        return (self.mean + eps @ self.chol.T).float().reshape(n, *self.shape)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        r = (x.reshape(x.shape[0], -1).double() - self.mean.to(x.device)).T
        white = torch.linalg.solve_triangular(self.chol.to(x.device), r, upper=False)
        return (-0.5 * white.pow(2).sum(0) - self.log_norm).to(x.dtype)


class UniformNoise:
    """Uniform on the box ``[low, high]^d`` (scalars or per-coordinate tensors); data outside
    the box have log-density ``−inf``, which NCE would read as certain data, so
    :func:`nce_loss` refuses them."""

    def __init__(self, low: float | torch.Tensor, high: float | torch.Tensor,
                 shape: tuple[int, ...]) -> None:
        self.shape = tuple(shape)
        self.low = torch.as_tensor(low, dtype=torch.float32).expand(self.shape).clone()
        self.high = torch.as_tensor(high, dtype=torch.float32).expand(self.shape).clone()
        if not bool((self.high > self.low).all()):
            raise ValueError("UniformNoise: every high must exceed its low")
        self.log_volume = float((self.high - self.low).double().log().sum())

    @classmethod
    def fit(cls, x: torch.Tensor, margin: float = 0.1) -> UniformNoise:
        """The data's bounding box, widened by ``margin`` × its width on each side."""
        lo, hi = x.min(0).values, x.max(0).values
        pad = margin * (hi - lo).clamp_min(1e-3)
        return cls(lo - pad, hi + pad, tuple(x.shape[1:]))

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        u = torch.rand((n, *self.shape), generator=generator)
        return self.low + u * (self.high - self.low)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        inside = ((x >= self.low.to(x)) & (x <= self.high.to(x))).flatten(1).all(1)
        out = torch.full((x.shape[0],), -self.log_volume, dtype=x.dtype, device=x.device)
        return out.masked_fill(~inside, -math.inf)


class CustomNoise:
    """A user's noise: ``sample_fn(n, generator) -> (n, *shape)`` and ``log_prob_fn(x) -> (n,)``,
    the latter normalised (NCE's ``c`` is ``log Z`` only against a normalised noise)."""

    def __init__(self, sample_fn: Callable[[int, torch.Generator | None], torch.Tensor],
                 log_prob_fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        self.sample_fn, self.log_prob_fn = sample_fn, log_prob_fn

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        return self.sample_fn(n, generator)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        return self.log_prob_fn(x)


def nce_loss(
    energy_fn: EnergyFn,
    x: torch.Tensor,
    noise: NoiseDistribution,
    log_z: torch.Tensor,
    *,
    noise_ratio: float = 1.0,
    generator: torch.Generator | None = None,
    noise_samples: torch.Tensor | None = None,
) -> LossOutput:
    """NCE's ``J`` (module docstring) for a batch ``x`` and ``round(ν·B)`` noise draws
    (``noise_samples`` overrides the draw). ``log_z`` is the learned scalar ``c``.

    Metrics: ``loss``; ``energy_pos`` (mean ``E`` at the data), ``energy_noise`` (at the noise),
    ``log_z``; ``accuracy`` (the classifier's hit rate, data and noise weighted alike: near 0.5
    when the model cannot tell data from noise, which is also the optimum when the noise equals
    the data)."""
    if noise_ratio <= 0:
        raise ValueError(f"noise_ratio ν must be > 0; got {noise_ratio}")
    if log_z.numel() != 1:
        raise ValueError(f"log_z must be one learned scalar; got shape {tuple(log_z.shape)}")
    n_noise = max(1, round(noise_ratio * x.shape[0]))
    y = noise_samples if noise_samples is not None else noise.sample(n_noise, generator)
    y = y.to(x)
    lp_x, lp_y = noise.log_prob(x), noise.log_prob(y)
    if not bool(torch.isfinite(lp_x).all()):
        raise ValueError("nce_loss: some data have zero noise density (log p_n = -inf), so NCE "
                         "cannot be consistent; widen the noise (UniformNoise.fit margin, "
                         "GaussianNoise scale) to cover every datum")
    nu = y.shape[0] / x.shape[0]  # the ratio actually drawn
    e_x, e_y = energy_fn(x), energy_fn(y)
    c = log_z.reshape(())
    # G(u) = log p_m − log p_n − log ν with log p_m = −E − c (Gutmann & Hyvärinen 2012, Eq. 8)
    g_x = -e_x - c - lp_x - math.log(nu)
    g_y = -e_y - c - lp_y - math.log(nu)
    loss = -(F.logsigmoid(g_x).sum() + F.logsigmoid(-g_y).sum()) / x.shape[0]
    acc = 0.5 * (float((g_x > 0).float().mean()) + float((g_y < 0).float().mean()))
    metrics = {"loss": float(loss.detach()), "energy_pos": float(e_x.detach().mean()),
               "energy_noise": float(e_y.detach().mean()), "log_z": float(c.detach()),
               "accuracy": acc}
    return LossOutput(loss, metrics, y)
