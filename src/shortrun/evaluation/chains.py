"""``shortrun eval --metrics chains`` and ``shortrun diagnose``: long chains drawn from a trained
model, with the diagnostics of :mod:`shortrun.metrics.chains` on their energy traces.

Which chains, per family (each the model's own kernel at its own settings, from its own starts):

- data-space EBM (and the score models): Langevin on the energy from the model's noise source
  (the score models: at ``σ_min`` and ``model.step_size``); the EBM's independence-MH jumps
  (``model.jumps``) are not part of the traced chain;
- RBM / Gaussian RBM: block Gibbs from the model's start state, traced by the free energy ``F(v)``;
- LEBM (and DAMC, the same model with ``prior_sampler: damc``): the prior chain on ``E_α(z)``
  (:meth:`LEBM.sample_prior`; DAMC starts it at the amortizer) and the posterior chain on
  ``−log p(x, z)`` for a few test images, each image with its own set of chains;
- Dual-MCMC: the x-chain on the EBM from generator samples, the z-chain on ``U(z)`` from draws of
  the inference network, for a few test images.

Every Langevin chain gets an acceptance rate from a second chain from the same starts: MALA whose
proposal is that Langevin step (:func:`~shortrun.samplers.traced.metropolised`); a low rate says
the unadjusted chain's step is far from leaving its target invariant. Gibbs always accepts
(rate 1). ``model.drift_clamp`` and the clamp to the data range are not Metropolised.

eval.json keys: ``chain_ess`` (the smallest bulk or tail ESS over every chain kind and target),
``chain_rhat`` (the largest split-R̂), ``accept`` (the smallest acceptance rate; null when no
chain has one: a noise-free Langevin chain is gradient descent); per chain kind
``chain_ess_bulk_<kind>``, ``chain_ess_tail_<kind>``, ``chain_rhat_<kind>``, ``accept_<kind>``;
and ``chain_n``, ``chain_steps``, ``chain_warmup`` (draws dropped from the front of every chain).
With a run directory, the traces go to ``chains.npz`` and their picture to ``chains.png``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from shortrun.data.base import LoadedData
from shortrun.errors import ConfigError, MissingExtraError
from shortrun.evaluation.plan import EvalContext, Group
from shortrun.metrics.chains import RHAT_OK, acceptance_rate, summarize
from shortrun.samplers.traced import gibbs_trace, langevin_trace, mala_accept_trace

CHAINS = 4
STEPS = 400
WARMUP = 0.5
TARGETS = 2  # test images whose posterior chains are diagnosed
TRACE_FILE = "chains.npz"
PLOT_FILE = "chains.png"


@dataclass
class ChainKind:
    """One kind of chain of a model: ``energy`` ``(targets, chains, steps)``; ``accept`` the
    acceptance rate of its Metropolised twin (1.0 for Gibbs; None for a noise-free chain)."""

    name: str
    energy: torch.Tensor
    accept: float | None


def _langevin(name: str, energy_fn: Any, x0: torch.Tensor, steps: int, step_size: float,
              noise_scale: float, targets: int, generator: torch.Generator, *,
              drift_clamp: float | None = None, domain: Any = None) -> ChainKind:
    """The Langevin chain as the model runs it, and its Metropolised twin for ``accept``."""
    _, trace = langevin_trace(energy_fn, x0, steps, step_size, noise_scale,
                              drift_clamp=drift_clamp, domain=domain, generator=generator)
    energy = trace.energy.reshape(targets, -1, steps)
    if noise_scale <= 0:  # gradient descent: no Metropolis-adjusted version, no rate
        return ChainKind(name, energy, None)
    twin = mala_accept_trace(energy_fn, x0, steps, step_size, noise_scale, generator=generator)
    return ChainKind(name, energy, acceptance_rate(twin.accepted))


def _targets(data: LoadedData, k: int) -> torch.Tensor:
    ref = data.test if data.test is not None else data.train
    return ref[:k]


def _repeat(x: torch.Tensor, chains: int) -> torch.Tensor:
    return x.repeat_interleave(chains, 0)


def draw_chains(model: Any, data: LoadedData, chains: int = CHAINS, steps: int = STEPS,
                generator: torch.Generator | None = None) -> list[ChainKind]:
    """Every chain kind of ``model`` (module docstring), ``chains`` chains of ``steps`` steps
    each; ``data`` gives the images of the posterior chains."""
    if chains < 2 or steps < 8:
        raise ConfigError(f"chains need --chains >= 2 (R̂ compares chains) and --steps >= 8; got "
                          f"{chains} chains of {steps} steps: raise them")
    name, m, dev = model.name, model.options, model.device
    gen = generator if generator is not None else torch.Generator(dev).manual_seed(0)
    if name == "ebm":
        x0 = model.noise.start(chains, generator=gen, device=dev)
        return [_langevin("x", model.energy, x0, steps, m.step_size, m.noise_scale, 1, gen,
                          drift_clamp=m.drift_clamp, domain=model.domain)]
    if name in ("dsm", "ssm", "sm"):
        x0 = model.noise.start(chains, generator=gen, device=dev)
        return [_langevin("x", model.density_energy(), x0, steps, m.step_size, 1.0, 1, gen)]
    if name in ("rbm", "grbm"):
        v0 = model.start_state(chains, gen).to(model.W)
        _, trace = gibbs_trace(model.params(), v0, steps, generator=gen)
        return [ChainKind("gibbs", trace.energy.reshape(1, chains, steps), 1.0)]
    if name == "lebm":
        return _lebm_chains(model, data, chains, steps, gen)
    if name == "dual_mcmc":
        return _dual_chains(model, data, chains, steps, gen)
    raise ConfigError(f"model {name!r}: no chains to diagnose (the chain diagnostics cover the "
                      "EBM, score, RBM, LEBM, DAMC and Dual-MCMC models)")


def _lebm_chains(model: Any, data: LoadedData, chains: int, steps: int,
                 gen: torch.Generator) -> list[ChainKind]:
    from shortrun.models.lebm import frozen  # only the latent models need it

    m, out = model.options, []
    if model.tilt is not None:  # the Gaussian prior is drawn exactly, with no chain
        with torch.no_grad():
            start, _ = model.chains.start_prior(chains, model.init_z, gen)
        with frozen(model):
            out.append(_langevin("prior", model.prior_energy, start, steps, m.prior_step_size,
                                 1.0, 1, gen))
    x = _targets(data, TARGETS).to(model.device)
    xr = _repeat(x, chains)
    with torch.no_grad():
        z0 = model.chains.start_posterior(xr, model.init_z, gen)
    with frozen(model):
        out.append(_langevin("posterior", lambda z: model.posterior_energy(z, xr), z0, steps,
                             m.post_step_size, 1.0, len(x), gen))
    return out


def _dual_chains(model: Any, data: LoadedData, chains: int, steps: int,
                 gen: torch.Generator) -> list[ChainKind]:
    m = model.options
    x0 = model.sample_generator(chains, gen)
    domain = (model.info.low, model.info.high) if m.clamp_x else None
    out = [_langevin("x", model.ebm, x0, steps, m.x_step_size, model.x_noise_scale, 1, gen,
                     domain=domain)]
    x = _targets(data, TARGETS).to(model.device)
    xr = _repeat(x, chains)
    with torch.no_grad():
        mean, logvar = model.inference(xr)
        eps = torch.randn(mean.shape, generator=gen, device=mean.device)
        z0 = mean + torch.exp(0.5 * logvar) * eps  # several draws of q(z|x): dispersed starts
    out.append(_langevin("z", lambda z: model.posterior_energy(z, xr), z0, steps,
                         m.z_step_size, m.z_noise / m.z_step_size, len(x), gen))
    return out


def check_warmup(warmup: float) -> None:
    if not 0.0 <= warmup < 1.0:
        raise ConfigError(f"--warmup {warmup}: give the fraction of each chain to drop, in "
                          "[0, 1), e.g. --warmup 0.5")


def chain_results(kinds: list[ChainKind], warmup: float = WARMUP) -> dict[str, Any]:
    """The eval.json keys (module docstring) of the traces, after dropping the first
    ``warmup`` fraction of every chain."""
    check_warmup(warmup)
    steps = int(kinds[0].energy.shape[-1])
    drop = int(warmup * steps)
    out: dict[str, Any] = {}
    for kind in kinds:
        sums = [summarize(kind.energy[t, :, drop:], f"{kind.name} chain")
                for t in range(kind.energy.shape[0])]
        out[f"chain_ess_bulk_{kind.name}"] = min(s["ess_bulk"] for s in sums)
        out[f"chain_ess_tail_{kind.name}"] = min(s["ess_tail"] for s in sums)
        out[f"chain_rhat_{kind.name}"] = max(s["rhat"] for s in sums)
        out[f"accept_{kind.name}"] = kind.accept
    names = [k.name for k in kinds]
    out["chain_ess"] = min(min(out[f"chain_ess_bulk_{n}"], out[f"chain_ess_tail_{n}"])
                           for n in names)
    out["chain_rhat"] = max(out[f"chain_rhat_{n}"] for n in names)
    rates = [out[f"accept_{n}"] for n in names if out[f"accept_{n}"] is not None]
    out["accept"] = min(rates) if rates else None
    out.update(chain_n=int(kinds[0].energy.shape[1]), chain_steps=steps, chain_warmup=drop)
    return out


def save_traces(kinds: list[ChainKind], run_dir: Path, warmup_draws: int) -> list[Path]:
    """``chains.npz`` (``energy_<kind>`` arrays ``(targets, chains, steps)``, ``warmup``) and,
    where matplotlib is installed, ``chains.png``; returns the files written."""
    run_dir = Path(run_dir)
    arrays = {f"energy_{k.name}": k.energy.numpy() for k in kinds}
    np.savez(run_dir / TRACE_FILE, warmup=np.int64(warmup_draws), **arrays)
    written = [run_dir / TRACE_FILE]
    try:
        plot_traces(run_dir / TRACE_FILE, run_dir / PLOT_FILE)
        written.append(run_dir / PLOT_FILE)
    except MissingExtraError:
        pass
    return written


def plot_traces(npz: Path, path: Path) -> None:
    """One panel per chain kind (its first target), one line per chain, warm-up shaded."""
    from shortrun.plotting import pyplot

    plt = pyplot("chain trace plots")
    with np.load(npz, allow_pickle=False) as f:
        warmup = int(f["warmup"])
        traces = {k.removeprefix("energy_"): f[k] for k in f.files if k.startswith("energy_")}
    fig, axes = plt.subplots(1, len(traces), figsize=(5 * len(traces), 3.2), dpi=90,
                             squeeze=False)
    for ax, (name, energy) in zip(axes.flat, traces.items(), strict=True):
        for chain in energy[0]:
            ax.plot(chain, lw=0.8)
        ax.axvspan(0, warmup, color="gray", alpha=0.15, label="warm-up (dropped)")
        ax.set_title(f"{name} chain", fontsize=10)
        ax.set_xlabel("step", fontsize=8)
        ax.set_ylabel("energy", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def diagnose(model: Any, data: LoadedData, chains: int = CHAINS, steps: int = STEPS,
             warmup: float = WARMUP, run_dir: Path | None = None, seed: int = 0,
             ) -> dict[str, Any]:
    """Draw the chains (seeded by ``seed``, the caller's random stream untouched), compute the
    eval.json keys and, with ``run_dir``, save the traces and their picture."""
    check_warmup(warmup)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        kinds = draw_chains(model, data, chains, steps,
                            torch.Generator(model.device).manual_seed(seed))
    out = chain_results(kinds, warmup)
    if run_dir is not None:
        save_traces(kinds, run_dir, out["chain_warmup"])
    return out


def chains_group(ctx: EvalContext) -> Group:
    """The ``chains`` metric of every family: :func:`diagnose` at the defaults."""
    return Group("chains", lambda done: diagnose(ctx.model, ctx.data, run_dir=ctx.run_dir,
                                                 seed=ctx.cfg.eval.seed))


def with_chains(plan: Callable[[EvalContext, list[str]], list[Group]],
                ) -> Callable[[EvalContext, list[str]], list[Group]]:
    """A family's planner that also understands ``chains``: the other metrics go to ``plan``
    (not called when ``chains`` is all that was asked), the chains come last."""

    def planned(ctx: EvalContext, metrics: list[str]) -> list[Group]:
        others = [m for m in metrics if m != "chains"]
        groups = plan(ctx, others) if others else []
        return groups + ([chains_group(ctx)] if "chains" in metrics else [])

    return planned


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def table(results: dict[str, Any]) -> list[str]:
    """The lines ``shortrun diagnose`` prints: one row per chain kind and a verdict."""
    kinds = [k.removeprefix("chain_rhat_") for k in results if k.startswith("chain_rhat_")]
    lines = [f"{results['chain_n']} chains x {results['chain_steps']} steps, first "
             f"{results['chain_warmup']} dropped as warm-up",
             f"{'chain':<10} {'ess_bulk':>9} {'ess_tail':>9} {'rhat':>7} {'accept':>7}  verdict"]
    for k in kinds:
        rhat = results[f"chain_rhat_{k}"]
        verdict = "mixed" if rhat <= RHAT_OK else f"NOT mixed (R̂ > {RHAT_OK})"
        lines.append(f"{k:<10} {results[f'chain_ess_bulk_{k}']:>9.1f} "
                     f"{results[f'chain_ess_tail_{k}']:>9.1f} {rhat:>7.3f} "
                     f"{_rate(results[f'accept_{k}']):>7}  {verdict}")
    return lines
