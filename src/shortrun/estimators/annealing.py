"""Annealed importance sampling for any energy (Neal 2001, "Annealed importance sampling").

The geometric path from a normalised base density ``p_0`` (known log-density and an exact
sampler) to the unnormalised target ``exp(−E)``,

    log f_β(x) = (1 − β) log p_0(x) − β E(x),        0 = β_0 < β_1 < … < β_K = 1,

is walked by ``R`` independent runs: ``x_0 ~ p_0``, then for ``k = 1 … K`` the weight gains
``log f_k(x_{k−1}) − log f_{k−1}(x_{k−1}) = −(β_k − β_{k−1}) (E(x) + log p_0(x))`` (Neal 2001,
Eq. 3) and the state moves by a Metropolis-adjusted kernel that leaves ``f_k`` invariant — the
library's :func:`~shortrun.samplers.mala.mala_step` or
:func:`~shortrun.samplers.hmc.hmc_step`, with the intermediate energy passed at call time. Since
``Z_0 = 1``, ``E[exp w] = Z`` and ``log Z ≈ log mean_r exp(w_r)``: unbiased in ``Z``, so by
Jensen biased *low* in ``log Z`` (a stochastic lower bound; Grosse et al. 2015 §3). The standard
error is the delta-method ``sd(exp w) / (√R · mean exp w)``, the effective sample size of the
weights Kish's ``(Σ exp w)² / Σ exp 2w``.

The step size is adapted between intermediate distributions from the previous transition's mean
acceptance (towards ``target_accept``), as Wu et al. (2017, "On the quantitative analysis of
decoder-based generative models", §4) do for HMC; each transition, given its step size, still
leaves its ``f_k`` exactly invariant.

Reverse AIS (:func:`ais_chains` with ``reverse=True``) starts from exact target samples and
walks the path back to ``p_0``; its ``−w`` averages to an upper bound on ``log Z`` in the same
sense (bidirectional Monte Carlo, Grosse et al. 2015 §4).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch

from shortrun.estimators.bases import GaussianBase
from shortrun.samplers.hmc import hmc_step
from shortrun.samplers.langevin import EnergyFn, GradientState, energy_grad
from shortrun.samplers.mala import mala_step

KERNELS = ("mala", "hmc")


class Base(Protocol):
    """A normalised base density: ``log_prob(x) -> (B,)`` and ``sample(n, generator)``."""

    def log_prob(self, x: torch.Tensor) -> torch.Tensor: ...

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor: ...


class AISEstimate(NamedTuple):
    """``log Z`` with its standard error, the per-run log-weights, their effective sample size
    and the mean acceptance of the transitions."""

    log_z: float
    stderr: float
    log_weights: torch.Tensor
    ess: float
    accept: float


@dataclass
class AISSettings:
    """How the path is walked: ``n_betas`` intermediate distributions on a sigmoid schedule
    (Grosse et al. 2015 §5: dense at both ends), ``n_steps`` kernel transitions at each,
    ``kernel`` ``"mala"`` or ``"hmc"`` (with ``n_leapfrog``), the initial ``step_size`` and the
    acceptance rate the adaptation aims at."""

    n_betas: int = 500
    n_steps: int = 1
    kernel: str = "mala"
    step_size: float = 0.1
    n_leapfrog: int = 5
    target_accept: float = 0.65
    adapt: bool = True

    def check(self) -> None:
        if self.n_betas < 2:
            raise ValueError(f"AIS needs n_betas >= 2 intermediate distributions; got "
                             f"{self.n_betas}")
        if self.n_steps < 1:
            raise ValueError(f"AIS needs n_steps >= 1 transition per distribution; got "
                             f"{self.n_steps}")
        if not callable(self.kernel) and self.kernel not in KERNELS:
            raise ValueError(f"AIS kernel must be one of {', '.join(KERNELS)}; got "
                             f"{self.kernel!r}")
        if not self.step_size > 0:
            raise ValueError(f"AIS step_size must be > 0; got {self.step_size}")
        if not 0 < self.target_accept < 1:
            raise ValueError(f"AIS target_accept must be in (0, 1); got {self.target_accept}")


def sigmoid_betas(n: int, rad: float = 4.0) -> torch.Tensor:
    """``n`` inverse temperatures from 0 to 1, ``σ(t)`` on ``t ∈ [−rad, rad]`` rescaled to end
    exactly at 0 and 1 (Grosse et al. 2015, §5)."""
    if n < 2:
        raise ValueError(f"AIS needs at least 2 inverse temperatures; got {n}")
    s = torch.sigmoid(torch.linspace(-rad, rad, n, dtype=torch.float64))
    return (s - s[0]) / (s[-1] - s[0])


class _Intermediate:
    """``E_β(x) = −(1 − β) log p_0(x) + β E(x)``, the energy of ``f_β``, keeping the two parts
    and their gradients of the last evaluation so the weight increments and the next
    distribution's state need no extra energy evaluation."""

    def __init__(self, energy: EnergyFn, base_log_prob: Callable[[torch.Tensor], torch.Tensor]):
        self.energy, self.base_log_prob, self.beta = energy, base_log_prob, 0.0
        self.last: tuple[torch.Tensor, ...] = ()

    def parts(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(E, ∇E, −log p_0, −∇log p_0)`` at ``x``."""
        e1, g1 = energy_grad(self.energy, x)
        e0, g0 = energy_grad(lambda y: -self.base_log_prob(y), x)
        return e1.detach(), g1.detach(), e0.detach(), g0.detach()

    def combine(self, x: torch.Tensor, parts: tuple[torch.Tensor, ...]) -> GradientState:
        e1, g1, e0, g0 = parts
        b = self.beta
        return GradientState(x, (1 - b) * e0 + b * e1, (1 - b) * g0 + b * g1)

    def energy_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.last = self.parts(x)
        s = self.combine(x, self.last)
        return s.energy, s.grad

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return -(1 - self.beta) * self.base_log_prob(x) + self.beta * self.energy(x)


def _rows(accept: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    return torch.where(accept.view(-1, *([1] * (new.dim() - 1))), new, old)


@torch.no_grad()
def ais_chains(energy: EnergyFn, base_log_prob: Callable[[torch.Tensor], torch.Tensor],
               x0: torch.Tensor, settings: AISSettings | None = None, *,
               betas: torch.Tensor | None = None, reverse: bool = False,
               generator: torch.Generator | None = None,
               ) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Run one AIS chain per row of ``x0`` along the path ``p_0 → exp(−E)``; returns the
    float64 log-weights ``(B,)``, the final states and the mean acceptance.

    Forward (default): ``x0`` must be exact draws from ``p_0``; ``log mean exp w`` estimates
    ``log Z``. Reverse: ``x0`` must be exact draws from ``exp(−E)/Z`` and the path is walked
    from ``β = 1`` to 0; ``−log mean exp w`` is then an upper bound on ``log Z`` in expectation.
    The energies act row by row, so rows may carry different targets (one per data point)."""
    s = settings or AISSettings()
    s.check()
    betas = sigmoid_betas(s.n_betas) if betas is None else betas.double()
    if betas.dim() != 1 or len(betas) < 2 or float(betas[0]) != 0.0 or float(betas[-1]) != 1.0:
        raise ValueError("AIS inverse temperatures must be a 1-D tensor from 0 to 1")
    if bool((betas[1:] < betas[:-1]).any()):
        raise ValueError("AIS inverse temperatures must not decrease")
    if reverse:
        betas = betas.flip(0)
    path = _Intermediate(energy, base_log_prob)
    x = x0.detach()
    parts = path.parts(x)
    log_w = torch.zeros(x.shape[0], dtype=torch.float64, device=x.device)
    step, accepted, moves = s.step_size, 0.0, 0
    for k in range(1, len(betas)):
        prev, beta = float(betas[k - 1]), float(betas[k])
        # log f_k(x) − log f_{k−1}(x) at the state reached under f_{k−1} (Neal 2001, Eq. 3)
        log_w += (-(beta - prev) * (parts[0] - parts[2])).double()
        if k == len(betas) - 1:
            break
        path.beta = beta
        state = path.combine(x, parts)
        for _ in range(s.n_steps):
            if callable(s.kernel):
                x, rate = s.kernel(path, x, generator)
                parts = path.parts(x)
                accepted, moves = accepted + rate, moves + 1
                continue
            if s.kernel == "mala":
                state, info = mala_step(path, state, step_size=step, generator=generator)
            else:
                state, info = hmc_step(path, state, step_size=step, n_leapfrog=s.n_leapfrog,
                                       generator=generator)
            acc = info.is_accepted
            parts = tuple(_rows(acc, new, old) for new, old in zip(path.last, parts, strict=True))
            rate = float(acc.float().mean())
            accepted, moves = accepted + rate, moves + 1
            if s.adapt:
                step *= math.exp(0.5 * (rate - s.target_accept))
            x = state.x
    return log_w, x, accepted / max(moves, 1)


def summarise(log_w: torch.Tensor, dim: int = 0) -> tuple[torch.Tensor, torch.Tensor,
                                                             torch.Tensor]:
    """``log mean exp w``, its delta-method standard error and Kish's ESS along ``dim``."""
    n = log_w.shape[dim]
    if n < 2:
        raise ValueError(f"AIS needs at least 2 runs for a standard error; got {n}")
    top = log_w.max(dim, keepdim=True).values
    r = torch.exp(log_w - top)
    mean = r.mean(dim)
    log_mean = top.squeeze(dim) + torch.log(mean)
    stderr = r.std(dim) / (math.sqrt(n) * mean)
    ess = r.sum(dim) ** 2 / (r * r).sum(dim)
    return log_mean, stderr, ess


def ais_log_partition(energy: EnergyFn, base: Base, n_runs: int = 100,
                      settings: AISSettings | None = None, *,
                      betas: torch.Tensor | None = None, whiten: bool = True,
                      generator: torch.Generator | None = None) -> AISEstimate:
    """AIS estimate of ``log Z = log ∫ exp(−E(x)) dx`` from ``n_runs`` runs started at exact
    draws of the normalised ``base`` (e.g. :meth:`GaussianBase.fit` to the data).

    With a :class:`~shortrun.estimators.bases.GaussianBase` and ``whiten`` the chains run in
    the base's whitened coordinates ``u = L⁻¹(x − mean)`` (base ``N(0, I)``, the Jacobian
    ``log |det L|`` added back): the kernels' one isotropic step size then fits a target the base
    resembles however ill-conditioned it is (the preconditioning of Girolami & Calderhead
    2011, with the base's covariance as the fixed metric)."""
    if n_runs < 2:
        raise ValueError(f"AIS needs at least 2 runs for a standard error; got {n_runs}")
    shift = 0.0
    if whiten and isinstance(base, GaussianBase):
        energy, shift = base.whitened_energy(energy), base.log_det
        base = GaussianBase.standard((base.dim,), dtype=base.mean.dtype,
                                     device=base.mean.device)
    x0 = base.sample(n_runs, generator)
    log_w, _, accept = ais_chains(energy, base.log_prob, x0, settings, betas=betas,
                                  generator=generator)
    log_z, se, ess = summarise(log_w)
    return AISEstimate(float(log_z) + shift, float(se), log_w, float(ess), accept)
