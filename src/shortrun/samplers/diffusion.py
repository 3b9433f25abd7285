"""The diffusion maths of the DAMC amortizer (Yu, Zhu, Xie, Ma, Gao, Zhu, Wu, "Learning
Energy-Based Prior Model with Diffusion-Amortized MCMC", NeurIPS 2023, §3): a Gaussian
diffusion over a latent vector in the log-SNR parametrisation of Kingma et al. (2021,
"Variational Diffusion Models"), pure functions of tensors and a noise predictor.

- Forward process: ``z_λ = α_λ z + σ_λ ε`` with ``α_λ² = sigmoid(λ)``, ``σ_λ² = sigmoid(−λ)``
  (variance preserving), ``λ`` the log signal-to-noise ratio.
- Schedule: ``λ(t) = −2 log tan(a t + b)`` for ``t ∈ [0, 1]`` (the cosine schedule of Nichol &
  Dhariwal 2021 written in λ), with ``λ(0) = λ_max`` and ``λ(1) = λ_min``; the authors' code
  uses ``λ ∈ [−5.1, 9.8]`` and 100 sampling steps.
- Loss: the DDPM noise-prediction loss ``½‖ε − ε̂(z_λ, λ)‖²`` summed over coordinates,
  ``t ~ U[0, 1]`` (Ho et al. 2020, the "simple" objective; DAMC's §3.2 trains the amortizer
  with it on the outputs of the Langevin chains it initialised).
- Sampler: ancestral sampling on the grid ``t_i = i/(N−1)``, from ``z ~ N(0, I)`` at ``t = 1``;
  each step predicts ``ẑ = (z_t − σ_t ε̂)/α_t`` and draws ``z_s ~ q(z_s | z_t, ẑ)`` with the
  "large" variance ``(1 − SNR_t/SNR_s) σ_t²``; the last step returns ``ẑ``.

For a Gaussian target ``z ~ N(m, S)`` the optimal predictor is linear,
``ε̂*(z_λ) = σ C⁻¹ (z_λ − α m)`` with ``C = α² S + σ² I``, and the minimum loss at ``λ`` is
``½ tr(I − σ² C⁻¹)`` (:func:`gaussian_min_loss`): the closed form the tests check against.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

#: ``eps_fn(z_t, logsnr) -> ε̂``, both ``(B, d)`` / ``(B,)``; the condition is bound by the caller
NoisePredictor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def logsnr_schedule(t: torch.Tensor, logsnr_min: float, logsnr_max: float) -> torch.Tensor:
    """``λ(t) = −2 log tan(a t + b)``: ``λ(0) = logsnr_max``, ``λ(1) = logsnr_min``."""
    b = math.atan(math.exp(-0.5 * logsnr_max))
    a = math.atan(math.exp(-0.5 * logsnr_min)) - b
    return -2.0 * torch.log(torch.tan(a * t + b))


def alpha_sigma(logsnr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(α_λ, σ_λ)`` of the variance-preserving forward process."""
    return torch.sigmoid(logsnr).sqrt(), torch.sigmoid(-logsnr).sqrt()


def diffuse(z: torch.Tensor, logsnr: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """``z_λ = α_λ z + σ_λ ε`` (``logsnr`` per row)."""
    alpha, sigma = alpha_sigma(logsnr[:, None])
    return alpha * z + sigma * eps


def denoising_loss(eps_fn: NoisePredictor, z: torch.Tensor, logsnr_min: float,
                   logsnr_max: float, generator: torch.Generator | None = None,
                   logsnr: torch.Tensor | None = None) -> torch.Tensor:
    """Per-example ``½‖ε − ε̂(z_λ, λ)‖²`` at ``t ~ U[0, 1]`` (or at the given ``logsnr``)."""
    n = z.shape[0]
    if logsnr is None:
        t = torch.rand(n, generator=generator, device=z.device, dtype=z.dtype)
        logsnr = logsnr_schedule(t, logsnr_min, logsnr_max)
    eps = torch.randn(z.shape, generator=generator, device=z.device, dtype=z.dtype)
    pred = eps_fn(diffuse(z, logsnr, eps), logsnr)
    return 0.5 * (eps - pred).pow(2).sum(1)


def ancestral_sample(eps_fn: NoisePredictor, n: int, dim: int, n_steps: int,
                     logsnr_min: float, logsnr_max: float,
                     generator: torch.Generator | None = None,
                     device: torch.device | str = "cpu",
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``n`` draws of the reverse process in ``n_steps`` network evaluations (module docstring)."""
    if n_steps < 2:
        raise ValueError(f"n_steps must be >= 2; got {n_steps}")
    z = torch.randn((n, dim), generator=generator, device=device, dtype=dtype)
    ones = torch.ones(n, device=device, dtype=dtype)
    for i in reversed(range(n_steps)):
        lam_t = logsnr_schedule(ones * (i / (n_steps - 1)), logsnr_min, logsnr_max)
        eps = eps_fn(z, lam_t)
        alpha_t, sigma_t = alpha_sigma(lam_t[:, None])
        z_hat = (z - sigma_t * eps) / alpha_t
        if i == 0:
            return z_hat
        lam_s = logsnr_schedule(ones * ((i - 1) / (n_steps - 1)), logsnr_min, logsnr_max)
        alpha_s, _ = alpha_sigma(lam_s[:, None])
        # q(z_s | z_t, ẑ) has mean (α_t|s σ_s²/σ_t²) z_t + (α_s σ²_t|s/σ_t²) ẑ, which in
        # r = SNR_t/SNR_s is r (α_s/α_t) z_t + (1 − r) α_s ẑ
        r = torch.exp(lam_t - lam_s)[:, None]
        mean = r * (alpha_s / alpha_t) * z + (1 - r) * alpha_s * z_hat
        std = ((1 - r) * sigma_t.pow(2)).sqrt()
        z = mean + std * torch.randn(z.shape, generator=generator, device=device, dtype=dtype)
    return z  # not reached


def gaussian_optimal_eps(z_t: torch.Tensor, logsnr: torch.Tensor, mean: torch.Tensor,
                         cov: torch.Tensor) -> torch.Tensor:
    """``E[ε | z_λ]`` for ``z ~ N(mean, cov)``: the best possible noise predictor."""
    alpha, sigma = alpha_sigma(logsnr)
    eye = torch.eye(cov.shape[0], dtype=cov.dtype)
    c = alpha[:, None, None] ** 2 * cov + sigma[:, None, None] ** 2 * eye
    rhs = (z_t - alpha[:, None] * mean)[..., None]
    return sigma[:, None] * torch.linalg.solve(c, rhs)[..., 0]


def gaussian_min_loss(logsnr: float, cov: torch.Tensor) -> float:
    """``min E ½‖ε − ε̂‖² = ½ tr(I − σ² (α² S + σ² I)⁻¹)`` at one noise level ``λ``."""
    alpha2, sigma2 = 1 / (1 + math.exp(-logsnr)), 1 / (1 + math.exp(logsnr))
    c = alpha2 * cov.double() + sigma2 * torch.eye(cov.shape[0], dtype=torch.float64)
    return float(0.5 * torch.trace(torch.eye(cov.shape[0], dtype=torch.float64)
                                   - sigma2 * torch.linalg.inv(c)))
