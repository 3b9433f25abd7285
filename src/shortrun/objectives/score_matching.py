"""Score-matching objectives: fit ``−∇ₓE`` to the data score without touching ``Z``.

In the library's sign the model score is ``ψ(x) = ∇ₓ log p(x) = −∇ₓE(x)``.

- Exact (Hyvärinen 2005, Eq. 4): ``J = E[tr ∇ψ + ½‖ψ‖²] = E[½‖∇E‖² − ΔE]``; the Laplacian
  costs one backward pass per dimension, so it is for low-dimensional data.
- Sliced (Song et al. 2019, Eq. 7): ``J = E_v[vᵀ∇ψ v + ½(vᵀψ)²]`` with projections ``v``
  (Rademacher or Gaussian, ``E vvᵀ = I``); the variance-reduced form (their Eq. 8) replaces
  ``½(vᵀψ)²`` by its expectation ``½‖ψ‖²``. ``vᵀ∇ψ v = −vᵀ∇(vᵀ∇E)`` costs one extra backward.
- Denoising (Vincent 2011, Eq. 9): perturb ``x̃ = x + σε`` and regress the score of the
  Gaussian kernel, ``−(x̃ − x)/σ² = −ε/σ``: ``J = ½ E‖∇E(x̃) − ε/σ‖²``. Over a σ ladder
  (Song & Ermon 2019, Eq. 6) each σ is weighted by ``λ(σ) = σ²``:
  ``J = ½ E‖σ ∇E(x̃, σ) − ε‖²`` with an optionally noise-conditional energy ``E(x, σ)``.

Every function returns a :class:`~shortrun.objectives.contrastive.LossOutput` whose metrics hold
``loss`` and ``energy_data`` (mean energy at the data, watched by the divergence guard).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from shortrun.objectives.contrastive import LossOutput

EnergyFn = Callable[[torch.Tensor], torch.Tensor]
CondEnergyFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _energy_and_grad(
    energy_fn: EnergyFn, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``E(x)``, ``∇ₓE`` (graph kept, so the loss can be differentiated in θ) and the input leaf
    that second derivatives are taken with respect to."""
    leaf = x.detach().requires_grad_(True)
    energy = energy_fn(leaf)
    (grad,) = torch.autograd.grad(energy.sum(), leaf, create_graph=True)
    return energy, grad, leaf


def _out(loss_per_example: torch.Tensor, energy: torch.Tensor) -> LossOutput:
    loss = loss_per_example.mean()
    return LossOutput(loss, {"loss": float(loss.detach()),
                             "energy_data": float(energy.detach().mean())})


def exact_score_matching(energy_fn: EnergyFn, x: torch.Tensor) -> LossOutput:
    """Hyvärinen's objective ``E[½‖∇E‖² − ΔE]`` with the Hessian trace computed exactly."""
    with torch.enable_grad():
        energy, grad, leaf = _energy_and_grad(energy_fn, x)
        flat = grad.flatten(1)
        laplacian = torch.zeros(x.shape[0], device=x.device, dtype=grad.dtype)
        for i in range(flat.shape[1]):
            (row,) = torch.autograd.grad(flat[:, i].sum(), leaf, create_graph=True)
            laplacian = laplacian + row.flatten(1)[:, i]
        per = 0.5 * (flat**2).sum(1) - laplacian
    return _out(per, energy)


def _projections(like: torch.Tensor, n: int, kind: str,
                 generator: torch.Generator | None) -> torch.Tensor:
    shape = (n, *like.shape)
    if kind == "rademacher":
        v = torch.randint(0, 2, shape, generator=generator, device=like.device).to(like.dtype)
        return 2 * v - 1
    if kind == "gaussian":
        return torch.randn(shape, generator=generator, device=like.device, dtype=like.dtype)
    raise ValueError(f"projection kind must be 'rademacher' or 'gaussian'; got {kind!r}")


def sliced_score_matching(
    energy_fn: EnergyFn,
    x: torch.Tensor,
    n_projections: int = 1,
    kind: str = "rademacher",
    variance_reduced: bool = True,
    *,
    generator: torch.Generator | None = None,
    projections: torch.Tensor | None = None,
) -> LossOutput:
    """Sliced score matching; ``projections`` (P, B, *shape) overrides the random draw."""
    if n_projections < 1:
        raise ValueError(f"n_projections must be >= 1; got {n_projections}")
    with torch.enable_grad():
        energy, grad, leaf = _energy_and_grad(energy_fn, x)
        vs = projections if projections is not None else _projections(
            x, n_projections, kind, generator)
        per = torch.zeros(x.shape[0], device=x.device, dtype=grad.dtype)
        for v in vs:
            v_grad = (v * grad).flatten(1).sum(1)  # vᵀ∇E = −vᵀψ
            (hv,) = torch.autograd.grad(v_grad.sum(), leaf, create_graph=True)
            quad = (v * hv).flatten(1).sum(1)  # vᵀ(∇²E)v = −vᵀ∇ψ v
            half_sq = 0.5 * (grad.flatten(1) ** 2).sum(1) if variance_reduced else 0.5 * v_grad**2
            per = per + (-quad + half_sq)
        per = per / len(vs)
    return _out(per, energy)


def denoising_score_matching(
    energy_fn: EnergyFn,
    x: torch.Tensor,
    sigma: float,
    *,
    generator: torch.Generator | None = None,
    noise: torch.Tensor | None = None,
) -> LossOutput:
    """Single-σ DSM ``½ E‖∇E(x + σε) − ε/σ‖²`` (``noise`` overrides the draw of ε)."""
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0; got {sigma}")
    eps = noise if noise is not None else torch.randn(
        x.shape, generator=generator, device=x.device, dtype=x.dtype)
    with torch.enable_grad():
        energy, grad, _ = _energy_and_grad(energy_fn, x + sigma * eps)
        per = 0.5 * ((grad - eps / sigma).flatten(1) ** 2).sum(1)
    return _out(per, energy)


def geometric_sigmas(sigma_max: float, sigma_min: float, n: int) -> torch.Tensor:
    """``n`` noise levels from ``sigma_max`` down to ``sigma_min``, equal ratios (NCSN)."""
    if not 0 < sigma_min <= sigma_max:
        raise ValueError(f"need 0 < sigma_min <= sigma_max; got {sigma_min}, {sigma_max}")
    if n < 1:
        raise ValueError(f"the σ ladder needs at least one level; got {n}")
    if n == 1:
        return torch.tensor([sigma_min])
    return torch.exp(torch.linspace(math.log(sigma_max), math.log(sigma_min), n))


def ladder_score_matching(
    energy_fn: CondEnergyFn,
    x: torch.Tensor,
    sigmas: torch.Tensor,
    *,
    generator: torch.Generator | None = None,
    levels: torch.Tensor | None = None,
    noise: torch.Tensor | None = None,
) -> LossOutput:
    """DSM over a σ ladder with ``λ(σ) = σ²``: ``½ E‖σ ∇E(x̃, σ) − ε‖²``.

    ``energy_fn(x, sigma)`` receives the per-example σ (shape ``(B,)``); an unconditional
    energy simply ignores it. ``levels``/``noise`` override the random draws (for tests).
    """
    sigmas = sigmas.to(x)
    idx = levels if levels is not None else torch.randint(
        len(sigmas), (x.shape[0],), generator=generator, device=x.device)
    sigma = sigmas[idx]
    eps = noise if noise is not None else torch.randn(
        x.shape, generator=generator, device=x.device, dtype=x.dtype)
    s = sigma.view(-1, *([1] * (x.dim() - 1)))
    with torch.enable_grad():
        energy, grad, _ = _energy_and_grad(lambda z: energy_fn(z, sigma), x + s * eps)
        per = 0.5 * ((s * grad - eps).flatten(1) ** 2).sum(1)
    return _out(per, energy)
