"""Log-likelihoods with error bars for the continuous models: ``shortrun.log_likelihood`` and
``shortrun eval --metrics loglik``.

- Latent-prior models (the image LEBM with EBM or Gaussian prior, DAMC — the same model with
  another chain source —, the LEBM whose prior learns by energy discrepancy (``ed_lebm``: its
  averaged prior, the one it samples from), the text LEBM, and the Dual-MCMC generator):
  ``log p(x)`` by :func:`~shortrun.estimators.latent.latent_log_likelihood` (``Z_α`` by Monte
  Carlo, the integral over ``z`` by AIS from the prior's Gaussian reference to the posterior),
  and beside it the BDMC sandwich on data simulated from the model
  (:func:`~shortrun.estimators.latent.bdmc`).
- Data-space EBMs: ``log p(x) = −E(x) − log Z`` with ``log Z`` by AIS from a Gaussian fitted to
  the training data (:func:`~shortrun.estimators.annealing.ais_log_partition`). No exact model
  samples exist, so there is no sandwich: ``log Z`` is biased low, so ``log p(x)`` is biased
  *high*; the spread of ``log Z`` over independent runs at ``K``, ``2K``, ``4K`` intermediate
  distributions shows how fast that bias and noise shrink.

bits/dim are of the 8-bit pixels the continuous data were scaled from (``data.scale``
symmetric: ``x = y/127.5 − 1``; unit: ``x = y/255``), i.e. ``(−log p(x) + d log s)/(d log 2)``
with ``s`` the scale, without dequantisation: comparable between the models here, not to
discrete-likelihood tables. See docs/evaluation.md.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from shortrun.errors import ConfigError
from shortrun.estimators.annealing import AISSettings, ais_log_partition, summarise
from shortrun.estimators.bases import GaussianBase
from shortrun.estimators.latent import (
    LatentModel,
    bdmc,
    latent_log_likelihood,
    prior_log_partition,
)
from shortrun.evaluation.plan import EvalContext, EvalSpec, Group, check_names, needs_test_split

LOG2 = math.log(2)
#: defaults of ``eval --metrics loglik`` (the Python API takes each as an argument)
N_TEST, N_SIMULATED, N_CHAINS, N_BETAS, LOG_Z_SAMPLES = 1000, 100, 10, 200, 100_000
PILOT_BETAS = 50  # latent models: AIS starts from a Gaussian fitted to pilot runs
EBM_RUNS, EBM_GROUPS = 25, 4
#: AIS runs per ``log Z`` estimate on data of at most ``LOW_DIM`` dimensions (the 2-D sets):
#: there a run costs almost nothing beside the batch, and the weights' spread, not the path's
#: length, limits the error (bench/README.md, issue 41: 1000 runs at 800 distributions hold the
#: trained ``ebm_8gaussians`` within 0.02 nats of its grid value; 100 runs did not)
EBM_RUNS_LOW_DIM, LOW_DIM = 250, 2
PIXEL_SCALE = {"symmetric": 127.5, "unit": 255.0}


def latent_model_of(model: Any) -> LatentModel:
    """The :class:`LatentModel` pieces of a shortrun latent model, from its public parts only
    (its generator, prior energy, ``llhd_sigma`` / ``sigma``, ``prior_sigma`` and ``nz``)."""
    m = model.options
    p = next(model.parameters())
    if model.name == "lebm_text":
        def log_lik(z, x):
            return model.generator.log_prob(x, z)

        def sample_x(z, gen):
            return model.generator.generate(z.shape[0], model.info.shape[0], z, gen)

        return LatentModel(log_lik, model.prior_energy, m.nz, m.prior_sigma,
                           model.tilt is not None, sample_x, p.dtype, p.device)
    if model.name == "dual_mcmc":
        sigma, prior_energy, tilted = m.sigma, None, False
    elif hasattr(m, "llhd_sigma") and hasattr(model, "prior_energy"):
        sigma, prior_energy, tilted = m.llhd_sigma, sampled_prior(model), model.tilt is not None
    else:
        raise ConfigError(f"log_likelihood: model {model.name!r} is not a latent model with a "
                          "Gaussian decoder (lebm, damc, ed_lebm, lebm_text, dual_mcmc)")
    return gaussian_decoder(model.generator, sigma, m.nz, m.prior_sigma, prior_energy,
                            tilted, p.dtype, p.device)


def sampled_prior(model: Any) -> Any:
    """The prior energy that ``model.sample`` draws from: ED-LEBM's moving average of the tilt
    where it keeps one (``averaged_prior``), else the live ``model.prior_energy``; the FD and
    the log-likelihood then score the same model."""
    averaged = getattr(model, "averaged_prior", None)
    if averaged is None:
        return model.prior_energy

    def prior_energy(z: torch.Tensor) -> torch.Tensor:
        with averaged():
            return model.prior_energy(z)

    return prior_energy


def gaussian_decoder(generator: Any, sigma: float, nz: int, prior_sigma: float = 1.0,
                     prior_energy: Any = None, tilted: bool = False,
                     dtype: torch.dtype = torch.float32, device: Any = "cpu") -> LatentModel:
    """``p(x|z) = N(x; g(z), σ²I)`` over a prior with energy ``prior_energy`` (default the
    untilted ``‖z‖²/(2σ_p²)``), for a user's own generator network."""
    def log_lik(z, x):
        r = (x - generator(z)).flatten(1)
        d = r.shape[1]
        return -r.pow(2).sum(1) / (2 * sigma ** 2) - 0.5 * d * math.log(2 * math.pi * sigma ** 2)

    def sample_x(z, gen):
        mean = generator(z)
        return mean + sigma * torch.randn(mean.shape, generator=gen, dtype=mean.dtype,
                                          device=mean.device)

    def gaussian_energy(z):
        return z.pow(2).sum(1) / (2 * prior_sigma ** 2)

    return LatentModel(log_lik, prior_energy or gaussian_energy, nz, prior_sigma, tilted,
                       sample_x, dtype, device)


def bits_per_dim(log_px: float, se: float, dim: int, scale: float | None) -> tuple[float, float]:
    """``(−log p(x) + d log s) / (d log 2)`` and its error (``s`` = 1 when unknown)."""
    s = scale or 1.0
    return (-log_px + dim * math.log(s)) / (dim * LOG2), se / (dim * LOG2)


def log_likelihood(model: Any, x: torch.Tensor, *, n_chains: int = N_CHAINS,
                   n_betas: int = N_BETAS, n_simulated: int = N_SIMULATED,
                   pilot_betas: int = PILOT_BETAS,
                   log_z_samples: int = LOG_Z_SAMPLES, batch_size: int = 100,
                   base: GaussianBase | None = None, pixel_scale: float | None = None,
                   settings: AISSettings | None = None,
                   generator: torch.Generator | None = None) -> dict[str, float]:
    """Mean ``log p(x)`` (nats) over the rows of ``x`` with its Monte-Carlo error, bits/dim,
    and the bound or bias information of the model's family (module docstring): for a latent
    model the sandwich on ``n_simulated`` simulated points (0 skips it); for a data-space EBM
    (``model.density_energy()``) ``log Z`` from a Gaussian ``base`` (default fitted to ``x``).
    The keys are the ``loglik*`` / ``bdmc_*`` keys of eval.json."""
    s = settings or AISSettings(n_betas=n_betas)
    t0 = time.perf_counter()
    if hasattr(model, "density_energy"):
        return _data_space(model.density_energy(), x, s, base, pixel_scale, generator, t0)
    lm = latent_model_of(model)
    lz = prior_log_partition(lm, log_z_samples, generator=generator)
    parts = [latent_log_likelihood(lm, x[i: i + batch_size].to(lm.device), n_chains, s,
                                   log_z_prior=lz, pilot_betas=pilot_betas, generator=generator)
             for i in range(0, x.shape[0], batch_size)]
    log_px = torch.cat([p.log_px for p in parts])
    ais_se = float(torch.cat([p.stderr for p in parts]).pow(2).sum().sqrt()) / len(log_px)
    mean, se = float(log_px.mean()), math.sqrt(ais_se ** 2 + lz.stderr ** 2)
    out: dict[str, float] = {
        "loglik": mean, "loglik_se": se, "loglik_data_sd": float(log_px.std()),
        "loglik_n": float(len(log_px)), "loglik_log_z_prior": lz.log_z,
        "loglik_log_z_prior_se": lz.stderr,
        "loglik_ess": float(torch.cat([p.ess for p in parts]).mean()),
        "loglik_accept": sum(p.accept for p in parts) / len(parts),
        "loglik_chains": float(n_chains), "loglik_betas": float(s.n_betas),
        "loglik_pilot_betas": float(pilot_betas),
    }
    if model.name != "lebm_text":
        out["loglik_bpd"], out["loglik_bpd_se"] = bits_per_dim(mean, se, x[0].numel(),
                                                               pixel_scale)
    out["loglik_seconds"] = time.perf_counter() - t0
    if n_simulated:
        t1 = time.perf_counter()
        sw = bdmc(lm, n_simulated, n_chains, s, log_z_prior=lz, pilot_betas=pilot_betas,
                  generator=generator)
        out.update({"bdmc_lower": sw.lower, "bdmc_upper": sw.upper, "bdmc_gap": sw.gap,
                    "bdmc_lower_se": sw.lower_se, "bdmc_upper_se": sw.upper_se,
                    "bdmc_n": float(sw.n), "bdmc_exact_prior": float(sw.method != "chain"),
                    "bdmc_seconds": time.perf_counter() - t1})
    return out


def ebm_runs(dim: int) -> int:
    """AIS runs per independent ``log Z`` estimate of a data-space EBM on ``dim``-dimensional
    data: ``EBM_RUNS_LOW_DIM`` up to ``LOW_DIM`` dimensions, else ``EBM_RUNS``."""
    return EBM_RUNS_LOW_DIM if dim <= LOW_DIM else EBM_RUNS


def _data_space(energy: Any, x: torch.Tensor, s: AISSettings, base: GaussianBase | None,
                pixel_scale: float | None, generator: torch.Generator | None,
                t0: float) -> dict[str, float]:
    """``−E(x) − log Z``; ``log Z`` at K, 2K and 4K intermediate distributions, each split into
    ``EBM_GROUPS`` independent AIS estimates of :func:`ebm_runs` runs (their spread is the
    ``loglik_log_z_sd_betas*`` keys); the reported ``log Z`` pools the runs at 4K."""
    base = base if base is not None else GaussianBase.fit(x)
    per_group = ebm_runs(x[0].numel())
    out: dict[str, float] = {}
    for mult in (1, 2, 4):
        k = s.n_betas * mult
        run = ais_log_partition(energy, base, EBM_GROUPS * per_group,
                                AISSettings(**{**vars(s), "n_betas": k}), generator=generator)
        groups, _, _ = summarise(run.log_weights.view(EBM_GROUPS, per_group), dim=1)
        out[f"loglik_log_z_betas{k}"] = float(groups.mean()) + base.log_det
        out[f"loglik_log_z_sd_betas{k}"] = float(groups.std())
    log_z, log_z_se, ess = run.log_z, run.stderr, run.ess  # all the runs at 4K, pooled
    with torch.no_grad():
        neg_e = torch.cat([-energy(x[i: i + 500]).double() for i in range(0, len(x), 500)])
    mean = float(neg_e.mean()) - log_z
    out.update({"loglik": mean, "loglik_se": log_z_se, "loglik_data_sd": float(neg_e.std()),
                "loglik_n": float(len(x)), "loglik_log_z": log_z, "loglik_log_z_se": log_z_se,
                "loglik_ess": ess, "loglik_accept": run.accept,
                "loglik_chains": float(EBM_GROUPS * per_group),
                "loglik_betas": float(4 * s.n_betas)})
    out["loglik_bpd"], out["loglik_bpd_se"] = bits_per_dim(mean, log_z_se, x[0].numel(),
                                                           pixel_scale)
    out["loglik_seconds"] = time.perf_counter() - t0
    return out


def loglik_group(ctx: EvalContext) -> Group:
    """``eval --metrics loglik``: the first ``N_TEST`` test points (the 2-D sets: all), the
    sandwich on ``N_SIMULATED`` simulated ones for latent models."""
    cfg, model, data = ctx.cfg, ctx.model, ctx.data

    def compute(done: dict) -> dict:
        # the 2-D sets are scored on every test point, as their grid log-likelihood is
        n = None if data.test[0].numel() <= LOW_DIM else N_TEST
        x = data.test[:n].to(model.device)
        model.eval()
        scale = PIXEL_SCALE.get(getattr(cfg.data, "scale", None))
        gen = torch.Generator(device=model.device).manual_seed(cfg.eval.seed)
        base = GaussianBase.fit(data.train[:10_000]) if hasattr(model, "density_energy") \
            else None
        with ctx.progress.task("loglik", 1, "estimates") as tick:
            out = log_likelihood(model, x, n_chains=N_CHAINS, n_betas=N_BETAS,
                                 n_simulated=N_SIMULATED, pilot_betas=PILOT_BETAS,
                                 log_z_samples=LOG_Z_SAMPLES, base=base, pixel_scale=scale,
                                 generator=gen, batch_size=cfg.eval.batch_size)
            tick(1)
        return out

    return Group("loglik", compute, (needs_test_split(
        data, "--metrics loglik: the dataset has no test split to score"),))


def with_loglik(spec: EvalSpec) -> EvalSpec:
    """``spec`` with ``loglik`` added to the names ``eval --metrics`` accepts (not a default:
    it costs minutes on images)."""
    def rest(requested: list[str]) -> list[str]:
        return [m for m in requested if m != "loglik"]

    def choose(cfg: Any, info: Any, requested: list[str], model_name: str) -> list[str]:
        others = rest(requested)
        if requested and not others:
            return ["loglik"]
        chosen = (spec.choose(cfg, info, others, model_name) if spec.choose is not None
                  else check_names(model_name, spec, others))
        return chosen + (["loglik"] if "loglik" in requested else [])

    def plan(ctx: EvalContext, metrics: list[str]) -> list[Group]:
        groups = spec.plan(ctx, rest(metrics)) if rest(metrics) else []
        return groups + ([loglik_group(ctx)] if "loglik" in metrics else [])

    return EvalSpec(spec.metrics + ("loglik",), spec.default_metrics, plan, choose)


def _spec(module: str) -> EvalSpec:
    import importlib

    return with_loglik(importlib.import_module(f"shortrun.evaluation.{module}").SPEC)


LEBM = _spec("lebm")
DUAL_MCMC = _spec("dual_mcmc")
EBM = _spec("density")
