"""Marginal likelihood of a latent-variable model with a (tilted) Gaussian prior, with
bidirectional Monte Carlo bounds (Grosse, Ghahramani & Adams 2015, "Sandwiching the marginal
likelihood using bidirectional Monte Carlo").

The model: ``p_α(z) = exp(f_α(z)) N(z; 0, σ_p²I) / Z_α`` (Pang et al. 2020, Eq. 1; ``f ≡ 0``
for a Gaussian prior, where ``Z_α = 1``) and any normalised decoder ``log p(x|z)``. In
shortrun's sign the prior is given by its energy ``E_α(z) = ‖z‖²/(2σ_p²) − f_α(z)``, so
``f_α(z) = ‖z‖²/(2σ_p²) − E_α(z)`` is recovered from the model's public prior energy.

- ``Z_α = E_{N(0,σ_p²I)}[exp f_α(z)]`` by plain Monte Carlo (:func:`prior_log_partition`): the
  tilt lives in a few dozen dimensions. Its error shifts every ``log p(x)`` by the same amount.
- ``log p(x) = log ∫ N(z; 0, σ_p²I) exp(f_α(z)) p(x|z) dz − log Z_α``: the integral by AIS on
  the geometric path from ``N(0, σ_p²I)`` (a normalised base with exact draws) to the
  unnormalised posterior, one batch row per (data point, run) pair
  (:func:`~shortrun.estimators.annealing.ais_chains`). Forward AIS is a stochastic lower bound.
- On data simulated from the model, ``(z*, x) ~ p_α(z) p(x|z)``, ``z*`` is an exact posterior
  draw for ``x``, so reverse AIS started there is a stochastic upper bound; the gap between the
  two bounds is how far the forward number can be from the truth on data like these.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from shortrun.estimators.annealing import AISSettings, ais_chains, summarise
from shortrun.samplers.mala import mala

LOG_2PI = math.log(2 * math.pi)


@dataclass
class LatentModel:
    """The pieces of a latent model the estimator needs, and nothing else.

    ``log_lik(z, x)``: normalised ``log p(x|z)`` per row; ``prior_energy(z)``:
    ``E_α(z) = ‖z‖²/(2σ_p²) − f_α(z)``; ``nz``, ``prior_sigma`` (σ_p); ``tilted``: False for a
    Gaussian prior (``log Z_α = 0`` exactly); ``sample_x(z, generator)``: ``x ~ p(x|z)``
    (needed only to simulate data for the bounds)."""

    log_lik: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    prior_energy: Callable[[torch.Tensor], torch.Tensor]
    nz: int
    prior_sigma: float = 1.0
    tilted: bool = True
    sample_x: Callable[[torch.Tensor, torch.Generator | None], torch.Tensor] | None = None
    dtype: torch.dtype = torch.float32
    device: torch.device | str = "cpu"

    def tilt(self, z: torch.Tensor) -> torch.Tensor:
        """``f_α(z) = ‖z‖²/(2σ_p²) − E_α(z)`` (0 for the Gaussian prior)."""
        if not self.tilted:
            return torch.zeros(z.shape[0], dtype=z.dtype, device=z.device)
        return z.pow(2).sum(1) / (2 * self.prior_sigma ** 2) - self.prior_energy(z)

    def reference_draws(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        return self.prior_sigma * torch.randn((n, self.nz), generator=generator,
                                              dtype=self.dtype, device=self.device)

    def reference_log_prob(self, z: torch.Tensor) -> torch.Tensor:
        s = self.prior_sigma
        return -z.pow(2).sum(1) / (2 * s * s) - 0.5 * z.shape[1] * (LOG_2PI + 2 * math.log(s))


class PriorPartition(NamedTuple):
    """``log Z_α`` with its delta-method standard error and the largest tilt seen."""

    log_z: float
    stderr: float
    max_tilt: float
    n: int


class LatentLikelihood(NamedTuple):
    """Per data point: ``log p(x)`` (nats), the Monte-Carlo standard error of its AIS part, the
    ESS of the AIS weights; the mean acceptance and ``log Z_α`` (whose error is common to all
    rows: :meth:`mean` adds it once)."""

    log_px: torch.Tensor
    stderr: torch.Tensor
    ess: torch.Tensor
    accept: float
    log_z_prior: PriorPartition

    def mean(self) -> tuple[float, float]:
        """Mean ``log p(x)`` over the rows and its Monte-Carlo standard error: independent AIS
        errors average down, the shared ``log Z_α`` error does not."""
        n = self.log_px.shape[0]
        ais = float(self.stderr.pow(2).sum().sqrt()) / n
        return float(self.log_px.mean()), math.sqrt(ais ** 2 + self.log_z_prior.stderr ** 2)


@torch.no_grad()
def prior_log_partition(model: LatentModel, n: int = 100_000, batch_size: int = 10_000,
                        generator: torch.Generator | None = None) -> PriorPartition:
    """``log Z_α = log E_{N(0,σ_p²I)}[exp f_α(z)]`` from ``n`` draws; exactly 0 untilted."""
    if not model.tilted:
        return PriorPartition(0.0, 0.0, 0.0, 0)
    if n < 2:
        raise ValueError(f"log Z_α needs at least 2 Monte-Carlo draws; got {n}")
    f = torch.cat([model.tilt(model.reference_draws(min(batch_size, n - i), generator)).double()
                   for i in range(0, n, batch_size)])
    log_z, se, _ = summarise(f)
    return PriorPartition(float(log_z), float(se), float(f.max()), n)


def _posterior_energy(model: LatentModel, x: torch.Tensor):
    """``z ↦ −log N(z; 0, σ_p²I) − f_α(z) − log p(x|z)``: the energy whose normaliser is
    ``Z_α p(x)``; rows of ``z`` pair with rows of ``x``."""
    def energy(z: torch.Tensor) -> torch.Tensor:
        return -model.reference_log_prob(z) - model.tilt(z) - model.log_lik(z, x)
    return energy


def _repeat(x: torch.Tensor, n: int) -> torch.Tensor:
    return x.repeat(n, *([1] * (x.dim() - 1)))


def posterior_base(model: LatentModel, x: torch.Tensor, n_chains: int, pilot_betas: int,
                   settings: AISSettings | None = None, inflate: float = 1.5,
                   min_std: float = 1e-3, generator: torch.Generator | None = None):
    """A diagonal Gaussian per row of ``x`` fitted to the end points of ``n_chains`` short
    pilot AIS runs from the reference to the posterior, its std inflated by ``inflate``
    (a proposal narrower than the target makes the weights heavy-tailed). Returns
    ``(log_prob, sample)`` over ``n_chains``-times repeated rows: any normalised base keeps the
    estimate unbiased in ``p(x)``; one close to the posterior shortens the path it needs."""
    b = x.shape[0]
    pilot = AISSettings(**{**vars(settings or AISSettings()), "n_betas": pilot_betas})
    _, z, _ = ais_chains(_posterior_energy(model, _repeat(x, n_chains)),
                         model.reference_log_prob, model.reference_draws(b * n_chains, generator),
                         pilot, generator=generator)
    z = z.view(n_chains, b, -1)
    mean = _repeat(z.mean(0), n_chains)
    std = _repeat(z.std(0).clamp_min(min_std) * inflate, n_chains)
    half_log_2pi = 0.5 * LOG_2PI

    def log_prob(u: torch.Tensor) -> torch.Tensor:
        r = (u - mean) / std
        return -(0.5 * r * r + std.log() + half_log_2pi).sum(1)

    def sample(gen: torch.Generator | None) -> torch.Tensor:
        return mean + std * torch.randn(mean.shape, generator=gen, dtype=mean.dtype,
                                        device=mean.device)

    return log_prob, sample


def latent_log_likelihood(model: LatentModel, x: torch.Tensor, n_chains: int = 10,
                          settings: AISSettings | None = None, *,
                          log_z_prior: PriorPartition | None = None,
                          z_exact: torch.Tensor | None = None, pilot_betas: int = 0,
                          generator: torch.Generator | None = None) -> LatentLikelihood:
    """``log p(x)`` of every row of ``x`` by AIS to the posterior (``n_chains`` runs per row)
    from the reference Gaussian, or with ``pilot_betas > 0`` from a Gaussian fitted per row to
    pilot runs (:func:`posterior_base`; Wu et al. 2017 likewise start decoder AIS close to the
    posterior). With ``z_exact`` (one exact posterior draw per row, e.g. the ``z`` that
    simulated ``x``) the runs go in reverse from it and the result is the BDMC upper bound
    instead of the forward lower bound."""
    if n_chains < 2:
        raise ValueError(f"n_chains must be >= 2 for a standard error; got {n_chains}")
    lz = log_z_prior if log_z_prior is not None else prior_log_partition(model,
                                                                         generator=generator)
    b = x.shape[0]
    xr = _repeat(x, n_chains)
    if pilot_betas > 0:
        base_log_prob, base_sample = posterior_base(model, x, n_chains, pilot_betas, settings,
                                                    generator=generator)
    else:
        base_log_prob = model.reference_log_prob
        base_sample = lambda gen: model.reference_draws(b * n_chains, gen)  # noqa: E731
    if z_exact is None:
        z0, reverse = base_sample(generator), False
    else:
        if z_exact.shape != (b, model.nz):
            raise ValueError(f"z_exact must be ({b}, {model.nz}), one exact posterior draw per "
                             f"row of x; got {tuple(z_exact.shape)}")
        z0, reverse = _repeat(z_exact.to(model.dtype), n_chains), True
    log_w, _, accept = ais_chains(_posterior_energy(model, xr), base_log_prob, z0,
                                  settings, reverse=reverse, generator=generator)
    log_w = log_w.view(n_chains, b)
    if reverse:
        # E[exp w] = 1 / (Z_α p(x)) along the reversed path: −log mean exp w bounds from above
        log_mean, se, ess = summarise(log_w)
        log_joint_z = -log_mean
    else:
        log_joint_z, se, ess = summarise(log_w)
    return LatentLikelihood(log_joint_z - lz.log_z, se, ess, accept, lz)


@torch.no_grad()
def simulate(model: LatentModel, n: int, log_z_prior: PriorPartition, *,
             max_proposals: int = 2_000_000, chain_steps: int = 2000, chain_step: float = 0.1,
             generator: torch.Generator | None = None,
             ) -> tuple[torch.Tensor, torch.Tensor, str]:
    """``n`` pairs ``(z*, x) ~ p_α(z) p(x|z)`` and how ``z*`` was drawn.

    Untilted: exact Gaussian draws. Tilted: rejection sampling from ``N(0, σ_p²I)`` accepting
    with probability ``exp(f(z) − M)``, ``M`` the largest tilt of the ``Z_α`` draws (raised, and
    counted as a failure of the bound, whenever a proposal exceeds it); exact when ``M`` bounds
    the tilt. When the expected number of proposals exceeds ``max_proposals`` the draws come
    instead from ``chain_steps`` MALA steps on the prior energy (method ``"chain"``), whose
    mixing the chain diagnostics should confirm."""
    if model.sample_x is None:
        raise ValueError("simulate needs model.sample_x, a sampler of p(x|z)")
    if not model.tilted:
        z, method = model.reference_draws(n, generator), "exact"
    elif n * math.exp(log_z_prior.max_tilt - log_z_prior.log_z) <= max_proposals:
        z, method = _rejection(model, n, log_z_prior.max_tilt, generator), "rejection"
    else:
        z0 = model.reference_draws(n, generator)
        z, _ = mala(model.prior_energy, z0, chain_steps, chain_step, generator=generator)
        method = "chain"
    return z, model.sample_x(z, generator), method


def _rejection(model: LatentModel, n: int, bound: float,
               generator: torch.Generator | None) -> torch.Tensor:
    got: list[torch.Tensor] = []
    count = 0
    while count < n:
        z = model.reference_draws(max(4 * n, 1000), generator)
        f = model.tilt(z)
        bound = max(bound, float(f.max()))  # a bound that failed: raise it and carry on
        u = torch.rand(f.shape, generator=generator, dtype=torch.float64, device=f.device)
        keep = z[torch.log(u) < (f - bound).double()]
        got.append(keep)
        count += keep.shape[0]
    return torch.cat(got)[:n]


class Sandwich(NamedTuple):
    """BDMC on simulated data: mean forward (lower) and reverse (upper) ``log p(x)``, the gap
    and each bound's Monte-Carlo standard error (``log Z_α``'s error is in both and cancels in
    the gap); ``method`` says how ``z*`` was drawn."""

    lower: float
    upper: float
    gap: float
    lower_se: float
    upper_se: float
    n: int
    method: str


def bdmc(model: LatentModel, n: int, n_chains: int = 10, settings: AISSettings | None = None,
         *, log_z_prior: PriorPartition | None = None, pilot_betas: int = 0,
         generator: torch.Generator | None = None) -> Sandwich:
    """Simulate ``n`` data points from the model and sandwich their mean ``log p(x)`` (the
    estimator's settings, ``pilot_betas`` included, as on real data)."""
    lz = log_z_prior if log_z_prior is not None else prior_log_partition(model,
                                                                         generator=generator)
    z, x, method = simulate(model, n, lz, generator=generator)
    fwd = latent_log_likelihood(model, x, n_chains, settings, log_z_prior=lz,
                                pilot_betas=pilot_betas, generator=generator)
    rev = latent_log_likelihood(model, x, n_chains, settings, log_z_prior=lz, z_exact=z,
                                pilot_betas=pilot_betas, generator=generator)
    (lo, lo_se), (hi, hi_se) = fwd.mean(), rev.mean()
    return Sandwich(lo, hi, hi - lo, lo_se, hi_se, n, method)
