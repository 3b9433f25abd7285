"""The two RBMs as energies: parameters, conditionals and free energies, at any inverse
temperature β.

In shortrun's sign, ``p(v, h) ∝ exp(−β E(v, h))`` (β = 1 is the model itself; tempering and
AIS use β < 1). Given one layer the other factorises (Hinton 2002; Smolensky 1986), which is
what the block-Gibbs kernel (:mod:`shortrun.samplers.gibbs`) samples from. The objects here are
plain tensors with no autograd state; called on a batch ``v`` they return the free energy
``F(v) = −log Σ_h exp(−E(v, h))``, the energy of the visible marginal, ``(B, D) → (B,)``.

- Bernoulli-Bernoulli: ``E(v, h) = −vᵀWh − bᵀv − cᵀh``,
  ``p(h=1|v) = σ(β(c + Wᵀv))``, ``p(v=1|h) = σ(β(b + Wh))``.
- Gaussian-Bernoulli (Cho, Ilin & Raiko 2011, Eq. 2 with σᵢ² = exp(zᵢ)):
  ``E(v, h) = Σᵢ (vᵢ − bᵢ)²/(2σᵢ²) − cᵀh − (v/σ²)ᵀWh``,
  ``p(h=1|v) = σ(β(c + Wᵀ(v/σ²)))``, ``p(v|h) = N(b + Wh, σ²/β)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

Beta = float | torch.Tensor
UNIFORM_NUMPY_FROM = 1 << 15  # draws of this many numbers or more come from NumPy's PCG64


def affine(x: torch.Tensor, W: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``bias + x @ W`` by ``torch.addmm``. Under CPU bf16 autocast the product runs in bfloat16
    and comes back in the bias's dtype, so chains, statistics and gradients stay float32."""
    return torch.addmm(bias, x, W).to(bias.dtype)


def uniform(shape: torch.Size | tuple[int, ...], like: torch.Tensor,
            generator: torch.Generator | None = None) -> torch.Tensor:
    """U[0, 1) numbers. Large CPU draws come from NumPy's PCG64 (about 2× faster than torch's
    Mersenne twister here), seeded by one draw from ``generator`` (or torch's global RNG), so
    runs stay reproducible from torch's RNG state alone, which the checkpoint holds."""
    numel = 1
    for n in shape:
        numel *= n
    # seeding a NumPy generator costs ~20 µs, worth it only for large draws
    if (numel >= UNIFORM_NUMPY_FROM and like.device.type == "cpu"
            and like.dtype in (torch.float32, torch.float64)):
        seed = int(torch.randint(0, 2**62, (), generator=generator))
        out = torch.empty(shape, dtype=like.dtype)
        np.random.default_rng(seed).random(out=out.numpy(), dtype=out.numpy().dtype)
        return out
    return torch.rand(shape, generator=generator, dtype=like.dtype, device=like.device)


def bernoulli(p: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """A {0,1} sample of independent Bernoulli(p), in ``p``'s dtype (one pass, in place)."""
    return uniform(p.shape, p, generator).lt_(p)


@dataclass
class _RBMWeights:
    """What both RBMs share: weights ``W`` (n_visible × n_hidden), visible bias ``b``, hidden
    bias ``c``, and binary hidden units ``p(h=1 | v) = σ(β · hidden_input(v))``."""

    W: torch.Tensor
    b: torch.Tensor
    c: torch.Tensor

    @property
    def n_visible(self) -> int:
        return self.W.shape[0]

    @property
    def n_hidden(self) -> int:
        return self.W.shape[1]

    def __call__(self, v: torch.Tensor) -> torch.Tensor:
        """The free energy at β = 1: the RBM as an energy of its visible units."""
        return self.free_energy(v)

    def free_energy(self, v: torch.Tensor, beta: Beta = 1.0) -> torch.Tensor:
        raise NotImplementedError

    def hidden_input(self, v: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def hidden_prob(self, v: torch.Tensor, beta: Beta = 1.0) -> torch.Tensor:
        a = self.hidden_input(v)
        return torch.sigmoid_(a if is_one(beta) else a * beta)


@dataclass
class BernoulliRBMParams(_RBMWeights):
    """Binary visible and hidden units."""

    def hidden_input(self, v: torch.Tensor) -> torch.Tensor:
        return affine(v, self.W, self.c)

    def visible_prob(self, h: torch.Tensor, beta: Beta = 1.0) -> torch.Tensor:
        a = affine(h, self.W.t(), self.b)
        return torch.sigmoid_(a if is_one(beta) else a * beta)

    def sample_visible(self, h: torch.Tensor, beta: Beta = 1.0,
                       generator: torch.Generator | None = None) -> torch.Tensor:
        return bernoulli(self.visible_prob(h, beta), generator)

    def free_energy(self, v: torch.Tensor, beta: Beta = 1.0) -> torch.Tensor:
        """``−log Σ_h exp(−β E(v, h))`` = ``−β bᵀv − Σⱼ softplus(β(c + Wᵀv))ⱼ``; a tensor
        ``beta`` holds one β per row of ``v``."""
        hidden = F.softplus(_col(beta) * self.hidden_input(v)).sum(-1)
        return -(_flat(beta) * (v @ self.b)) - hidden

    def energy(self, v: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return -((v @ self.W) * h).sum(-1) - v @ self.b - h @ self.c


@dataclass
class GaussianRBMParams(_RBMWeights):
    """Gaussian visible units: as Bernoulli plus ``log_var`` (zᵢ = log σᵢ²)."""

    log_var: torch.Tensor

    def hidden_input(self, v: torch.Tensor) -> torch.Tensor:
        return affine(v * torch.exp(-self.log_var), self.W, self.c)

    def visible_mean(self, h: torch.Tensor) -> torch.Tensor:
        return affine(h, self.W.t(), self.b)

    def sample_visible(self, h: torch.Tensor, beta: Beta = 1.0,
                       generator: torch.Generator | None = None) -> torch.Tensor:
        mean = self.visible_mean(h)
        std = torch.exp(0.5 * self.log_var)
        if not is_one(beta):
            std = std / torch.sqrt(torch.as_tensor(beta, dtype=mean.dtype, device=mean.device))
        noise = torch.randn(mean.shape, generator=generator, dtype=mean.dtype, device=mean.device)
        return mean + std * noise

    def free_energy(self, v: torch.Tensor, beta: Beta = 1.0) -> torch.Tensor:
        """``β Σᵢ (vᵢ − bᵢ)²/(2σᵢ²) − Σⱼ softplus(β(c + Wᵀ(v/σ²)))ⱼ``."""
        quad = (0.5 * (v - self.b) ** 2 * torch.exp(-self.log_var)).sum(-1)
        return _flat(beta) * quad - F.softplus(_col(beta) * self.hidden_input(v)).sum(-1)

    def energy(self, v: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        quad = (0.5 * (v - self.b) ** 2 * torch.exp(-self.log_var)).sum(-1)
        return quad - h @ self.c - ((v * torch.exp(-self.log_var)) @ self.W * h).sum(-1)


RBMParams = BernoulliRBMParams | GaussianRBMParams


def is_one(beta: Beta) -> bool:
    """Whether ``beta`` is the plain number 1 (the untempered model: no multiply needed)."""
    return isinstance(beta, (int, float)) and beta == 1.0


def _col(beta: Beta) -> Beta:
    return beta.reshape(-1, 1) if isinstance(beta, torch.Tensor) else beta


def _flat(beta: Beta) -> Beta:
    return beta.reshape(-1) if isinstance(beta, torch.Tensor) else beta
