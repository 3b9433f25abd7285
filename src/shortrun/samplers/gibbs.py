"""Block-Gibbs kernel of restricted Boltzmann machines, and the two RBMs' conditionals.

In shortrun's sign, ``p(v, h) ∝ exp(−β E(v, h))`` with inverse temperature ``β`` (1 is the
model itself; tempering and AIS use β < 1). Given one layer the other factorises, so a sweep
``v → h → v′`` is two matrix multiplies plus elementwise sigmoids / Gaussian noise
(Hinton 2002; Smolensky 1986). The parameter objects here are plain tensors with no
autograd state: the kernel is a pure function of (parameters, state, generator).

- Bernoulli-Bernoulli: ``E(v, h) = −vᵀWh − bᵀv − cᵀh``,
  ``p(h=1|v) = σ(β(c + Wᵀv))``, ``p(v=1|h) = σ(β(b + Wh))``.
- Gaussian-Bernoulli (Cho, Ilin & Raiko 2011, Eq. 2 with σᵢ² = exp(zᵢ)):
  ``E(v, h) = Σᵢ (vᵢ − bᵢ)²/(2σᵢ²) − cᵀh − (v/σ²)ᵀWh``,
  ``p(h=1|v) = σ(β(c + Wᵀ(v/σ²)))``, ``p(v|h) = N(b + Wh, σ²/β)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from shortrun.onednn import onednn_linear, onednn_usable

Beta = float | torch.Tensor


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
    """Give NumPy's BLAS the thread count torch uses (``train.threads``), once per change."""
    global _blas_threads
    n = torch.get_num_threads()
    if n != _blas_threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n, user_api="blas")
        _blas_threads = n


def uniform(shape: torch.Size | tuple[int, ...], like: torch.Tensor,
            generator: torch.Generator | None = None) -> torch.Tensor:
    """U[0, 1) numbers. Large CPU draws come from NumPy's PCG64 (about 2× faster than torch's
    Mersenne twister here), seeded by one draw from ``generator`` (or torch's global RNG), so
    runs stay reproducible from torch's RNG state alone, which the checkpoint holds."""
    numel = 1
    for n in shape:
        numel *= n
    # seeding a NumPy generator costs ~20 µs, worth it only for large draws
    if (numel >= 1 << 15 and like.device.type == "cpu"
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

    def hidden_input(self, v: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def hidden_prob(self, v: torch.Tensor, beta: Beta = 1.0) -> torch.Tensor:
        a = self.hidden_input(v)
        return torch.sigmoid_(a if _is_one(beta) else a * beta)


@dataclass
class BernoulliRBMParams(_RBMWeights):
    """Binary visible and hidden units."""

    def hidden_input(self, v: torch.Tensor) -> torch.Tensor:
        return affine(v, self.W, self.c)

    def visible_prob(self, h: torch.Tensor, beta: Beta = 1.0) -> torch.Tensor:
        a = affine(h, self.W.t(), self.b)
        return torch.sigmoid_(a if _is_one(beta) else a * beta)

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
        if not _is_one(beta):
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


class GibbsState(NamedTuple):
    """End of a chain: visible state ``v``, the hidden input ``a = β(c + Wᵀv)`` there (its
    softplus gives the free energy) and ``h_prob = σ(a) = p(h=1 | v)``."""

    v: torch.Tensor
    h_input: torch.Tensor
    h_prob: torch.Tensor


def hidden_state(params: RBMParams, v: torch.Tensor, beta: Beta = 1.0) -> GibbsState:
    """``GibbsState`` at ``v`` without moving: one matrix multiply and a sigmoid."""
    a = params.hidden_input(v)
    if not _is_one(beta):
        a = a * beta
    return GibbsState(v, a, torch.sigmoid(a))


def block_gibbs(params: RBMParams, v: torch.Tensor | GibbsState, n_steps: int,
                beta: Beta = 1.0, generator: torch.Generator | None = None) -> GibbsState:
    """``n_steps`` block-Gibbs sweeps ``v → h ~ p(h|v) → v′ ~ p(v|h)`` at inverse temperature
    ``beta`` (a float, or a tensor broadcasting against ``(B, 1)`` for one β per chain).

    ``v`` may be a :class:`GibbsState` the caller already has (the positive phase of CD does),
    saving one matrix multiply. Returns the final ``v`` with its hidden input and ``p(h|v)``
    — the statistics the CD/PCD update needs (Hinton 2002, Eq. 5).
    """
    if n_steps < 0:
        raise ValueError(f"block_gibbs: n_steps must be >= 0; got {n_steps}")
    state = v if isinstance(v, GibbsState) else hidden_state(params, v, beta)
    for _ in range(n_steps):
        h = bernoulli(state.h_prob, generator)
        state = hidden_state(params, params.sample_visible(h, beta, generator), beta)
    return state


def _is_one(beta: Beta) -> bool:
    return isinstance(beta, (int, float)) and beta == 1.0


def _col(beta: Beta) -> Beta:
    return beta.reshape(-1, 1) if isinstance(beta, torch.Tensor) else beta


def _flat(beta: Beta) -> Beta:
    return beta.reshape(-1) if isinstance(beta, torch.Tensor) else beta
