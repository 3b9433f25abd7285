"""Latent-space EBM prior (Pang, Han, Nijkamp, Zhu, Wu, "Learning Latent Space Energy-Based
Prior Model", NeurIPS 2020).

Model: ``x = g_β(z) + ε``, ``ε ~ N(0, σ²I)``, with the prior ``p_α(z) ∝ exp(f_α(z)) N(0, σ_p²I)``
(paper Eq. 1-2). Both parts are learned by maximum likelihood (Eq. 5-7) with two short-run
Langevin chains from ``N(0, I)`` (Eq. 9-10), run by the library's one kernel:

- prior chain (negative phase): ``K0`` steps of size ``s0`` on ``E_α(z)``;
- posterior chain (positive phase): ``K1`` steps of size ``s1`` on
  ``‖x − g_β(z)‖²/(2σ²) + E_α(z)`` = ``−log p(x, z)`` + const — both terms summed into one energy,
  so each step is one backward pass, with every parameter frozen (no parameter-gradient work).

Updates, in the order of the authors' ``train_svhn.py``: posterior chain, prior chain, generator
step on ``Σ_pixels ‖x − g(z⁺)‖² / B`` (the ``generator_loss`` hook, which the text subclass
overrides), EBM step on ``mean E_α(z⁺) − mean E_α(z⁻)`` (the
contrastive objective, Eq. 7). ``model.prior: gaussian`` removes the EBM (the paper's ablation).

Where the chains start is a chain source (:mod:`shortrun.models.latent_chains`), ``N(0, I)``
by default. ``chains=DAMC(...)`` (recipe: ``model.prior_sampler: damc``) starts them from a
learned diffusion sampler and trains it on the chains' outputs (Yu et al. 2023;
:mod:`shortrun.models.damc`): the chains and the updates above are unchanged, only where the
chains start and one more update, the source's, between the chains and the generator step.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from shortrun.data.base import DataInfo
from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.base import Model, ModelOptions, OptimOptions, merge_options
from shortrun.models.damc import DAMCRecipeKeys, chains_from_recipe, rename_old_checkpoint_keys
from shortrun.models.inputs import check_batch, check_sample_args
from shortrun.models.latent_chains import ShortRunChains
from shortrun.models.lebm_nets import ACTIVATIONS, GENERATORS, Generator, PriorTilt, pick_generator
from shortrun.objectives.contrastive import contrastive_loss
from shortrun.samplers.langevin import LangevinInfo, langevin


@dataclass
class LatentPriorOptions(ModelOptions):
    """The latent EBM prior and its two chains: shared by the image and the text model."""

    prior: str = fld("ebm", choices=("ebm", "gaussian"), doc="gaussian: the EBM removed")
    nz: int = fld(100, gt=0, doc="latent dimension")
    ndf: int = fld(200, gt=0, doc="prior MLP width")
    prior_act: str = fld("gelu", choices=tuple(ACTIVATIONS))
    prior_sigma: float = fld(1.0, gt=0, doc="σ_p of the Gaussian reference N(0, σ_p²I)")
    init_sigma: float = fld(1.0, gt=0, doc="both chains start at N(0, init_sigma²I)")
    prior_steps: int = fld(60, gt=0, doc="K0, prior chain length")
    prior_step_size: float = fld(0.4, gt=0, doc="s0")
    post_steps: int = fld(20, gt=0, doc="K1, posterior chain length")
    post_step_size: float = fld(0.1, gt=0, doc="s1")
    lr_prior: float = fld(2e-5, gt=0,
                          doc="Adam lr of the prior EBM; the paper's 2e-5, not train.lr (the "
                              "one exception to lr_<net> defaulting to train.lr)")
    lr_generator: float | None = fld(None, gt=0,
                                     doc="Adam lr of the generator / decoder; default train.lr")


ANOMALY_SCORES = ("joint", "tilt", "unweighted")


def anomaly_scores_from_terms(terms: dict[str, torch.Tensor], sigma: float,
                              ) -> dict[str, torch.Tensor]:
    """Every named anomaly score from the terms at one posterior sample (higher = more
    anomalous). ``terms``: ``sse`` ``‖x − g(z)‖²``, ``prior`` ``E_α(z) = −f_α(z) +
    ‖z‖²/(2σ_p²)``, ``tilt`` ``−f_α(z)``.

    - ``joint`` = ``sse/(2σ²) + prior``: ``−log p(x, z)`` + const, the score of Pang et al.
      (2020, §5.4), with ``σ`` the trained ``llhd_sigma`` or a σ′ chosen on validation;
    - ``tilt`` = ``−f_α(z)``: how much the learned prior disfavours z against N(0, σ_p²I);
    - ``unweighted`` = ``sse + prior``: the score of the successor's code (Yu et al. 2023,
      DAMC), ``‖x − g(z)‖² + E(z) + ‖z‖²/2`` with σ_p = 1; the joint score at σ′ = 1/√2.
    """
    sse, prior = terms["sse"], terms["prior"]
    return {"joint": sse / (2 * sigma ** 2) + prior, "tilt": terms["tilt"],
            "unweighted": sse + prior}


@dataclass
class LEBMOptions(DAMCRecipeKeys, LatentPriorOptions):
    generator: str = fld("auto", choices=GENERATORS, doc="auto: picked from the data shape")
    ngf: int = fld(64, gt=0, doc="generator width")
    llhd_sigma: float = fld(0.3, gt=0, doc="σ of the observation noise ε ~ N(0, σ²I)")
    channels_last: bool | str = fld("auto", choices=(True, False, "auto"),
                                    doc="true: NHWC generator, false: NCHW; auto: the faster "
                                        "here, measured once before the first chain")
    anomaly_score: str = fld("joint", choices=ANOMALY_SCORES,
                             doc="joint: −log p(x, z) (Pang et al. 2020); tilt: −f_α(z) alone; "
                                 "unweighted: ‖x − g(z)‖² + E_α(z) (Yu et al. 2023); all at "
                                 "one z ~ p(z|x)")
    anomaly_llhd_sigma: float | None = fld(None, gt=0,
                                           doc="σ′ weighting the reconstruction term of the "
                                               "joint score, post hoc (selected on "
                                               "validation); default llhd_sigma")
    eval_post_steps: int | None = fld(None, gt=0,
                                      doc="posterior steps for mse/auprc; default post_steps")


@contextlib.contextmanager
def frozen(*modules: nn.Module) -> Iterator[None]:
    """Parameters stop requiring grad inside the block: chains then build a graph through z
    only, so a backward pass computes input gradients and no weight gradients."""
    params = [p for m in modules for p in m.parameters()]
    flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, f in zip(params, flags, strict=True):
            p.requires_grad_(f)


class LEBM(Model):
    """Latent EBM prior over ``generator`` (an ``nn.Module`` from ``(B, nz)`` to data of any
    shape); ``prior`` is the tilt ``f_α`` (an ``nn.Module`` ``(B, nz) → (B,)``, e.g.
    :class:`~shortrun.models.lebm_nets.PriorTilt`), ``None`` for the Gaussian prior alone.
    Keyword options are ``LEBMOptions`` fields (``nz`` must match the generator's input).
    ``chains`` is where the chains start (:mod:`shortrun.models.latent_chains`): default
    ``N(0, init_sigma²I)`` (Pang et al. 2020), or e.g. ``DAMC(amortizer, DAMCOptions(...))``;
    left ``None`` with ``prior_sampler='damc'``, the DAMC source is built from the ``damc_*``
    options once the data's shape is known.
    """

    Config = LEBMOptions
    networks = ("generator", "prior", "chains")

    def __init__(self, generator: nn.Module, prior: nn.Module | None = None,
                 options: LatentPriorOptions | None = None, info: DataInfo | None = None,
                 *, chains: ShortRunChains | None = None, **option_values: Any) -> None:
        options = merge_options(type(self).Config, options, option_values)
        if prior is not None and options.prior == "gaussian":
            raise ConfigError("LEBM: a prior network was given but options.prior is "
                              "'gaussian'; drop the prior network or set prior='ebm'")
        if prior is None and options.prior != "gaussian":
            options = dataclasses.replace(options, prior="gaussian")  # what the model is
        super().__init__(options, info)
        self._given(generator=generator, prior=prior, chains=chains)
        self.generator = generator
        self.tilt = prior
        self.chains = chains if chains is not None else ShortRunChains()
        self._chains_from_options = chains is None
        self.register_load_state_dict_pre_hook(rename_old_checkpoint_keys)
        self._finish_init()

    def setup(self, info: DataInfo) -> None:
        self.build_chains(info)

    def build_chains(self, info: DataInfo, vocab: int | None = None) -> None:
        """The source the options name (``prior_sampler: damc``), whose encoder depends on the
        data's shape; a source given to the constructor is kept."""
        built = (chains_from_recipe(self.options, self.options.nz, tuple(info.shape), info.kind,
                                    vocab) if self._chains_from_options else None)
        if built is not None:
            self.chains = built.to(self.device)

    @property
    def damc(self) -> ShortRunChains | None:
        """The chain source when it learns (DAMC), else None: the earlier attribute."""
        return None if type(self.chains) is ShortRunChains else self.chains

    @classmethod
    def from_config(cls, options: LEBMOptions, info: DataInfo) -> LEBM:
        m = options
        kind = pick_generator(m.generator, info.shape)
        generator = Generator(kind, m.nz, m.ngf, m.channels_last)
        prior = PriorTilt(m.nz, m.ndf, m.prior_act) if m.prior == "ebm" else None
        model = cls(generator, prior, options, info)
        model.user_networks = ()
        return model

    def tilt_value(self, z: torch.Tensor) -> torch.Tensor:
        """``f_α(z)`` as ``(B,)``: a user's tilt may return ``(B, 1)``."""
        f = self.tilt(z)
        return f.reshape(z.shape[0]) if f.dim() != 1 else f

    # --- energies (shortrun's sign: p ∝ exp(−E)) ------------------------------------------
    def prior_energy(self, z: torch.Tensor) -> torch.Tensor:
        """``E_α(z) = −f_α(z) + ‖z‖²/(2σ_p²)``.

        The one place the paper's sign is translated: Pang et al. (2020) Eq. 1 writes
        ``p_α(z) = exp(f_α(z)) p_0(z) / Z(α)`` with ``p_0 = N(0, σ_p²I)``; so
        ``−log p_α(z) = −f_α(z) + ‖z‖²/(2σ_p²) + const``. With ``prior: gaussian``, ``f ≡ 0``.
        """
        z = z.reshape(z.shape[0], -1)
        e = z.pow(2).sum(1) / (2 * self.options.prior_sigma ** 2)
        return e if self.tilt is None else e - self.tilt_value(z)

    def recon_energy(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``−log p_β(x|z)`` + const ``= ‖x − g_β(z)‖²/(2σ²)`` summed over pixels."""
        r = (x - self.generator(z)).flatten(1)
        return r.pow(2).sum(1) / (2 * self.options.llhd_sigma ** 2)

    def posterior_energy(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``−log p(x, z)`` up to a constant: the energy of the posterior chain (Eq. 10)."""
        return self.recon_energy(z, x) + self.prior_energy(z)

    # --- chains --------------------------------------------------------------------------
    def init_z(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        return self.options.init_sigma * torch.randn(
            (n, self.options.nz), generator=generator, device=self.device)

    def sample_prior(self, n: int, steps: int | None = None,
                     generator: torch.Generator | None = None,
                     callback: Callable[[int, torch.Tensor, LangevinInfo], None] | None = None,
                     start: torch.Tensor | None = None) -> torch.Tensor:
        """Short-run (or, with ``steps``, long-run) prior chain from ``start`` when given, else
        from the chain source's start (``N(0, init_sigma²I)``; DAMC: the amortizer's ``q_φ(z)``,
        followed by its ``sample_steps`` when ``steps`` is None).

        With the Gaussian prior the draw is exact and no chain is run (unless a callback asks
        for a trace)."""
        m: LEBMOptions = self.options
        if self.tilt is None and callback is None and start is None:
            return m.prior_sigma * torch.randn((n, m.nz), generator=generator, device=self.device)
        after = None
        if start is None:
            start, after = self.chains.start_prior(n, self.init_z, generator)
        if steps is None:
            steps = m.prior_steps if after is None else after
        with frozen(self):
            z, _ = langevin(self.prior_energy, start, steps, m.prior_step_size, 1.0,
                            generator=generator, callback=callback)
        return z

    def sample_posterior(self, x: torch.Tensor, steps: int | None = None,
                         generator: torch.Generator | None = None,
                         start: torch.Tensor | None = None) -> torch.Tensor:
        """Short-run posterior chain ``z ~ p(z | x)`` from ``start`` when given, else from the
        chain source's start (``N(0, init_sigma²I)``; DAMC: the amortizer's ``q_φ(z | x)``)."""
        m: LEBMOptions = self.options
        with frozen(self):
            z0 = start if start is not None else self.chains.start_posterior(x, self.init_z,
                                                                              generator)
            z, _ = langevin(lambda z: self.posterior_energy(z, x), z0, steps or m.post_steps,
                            m.post_step_size, 1.0, generator=generator)
        return z

    # --- training ------------------------------------------------------------------------
    def build_optimizers(self, optim: OptimOptions | None = None,
                         ) -> dict[str, torch.optim.Optimizer]:
        """Adam for the generator at ``model.lr_generator`` (default ``train.lr``) and for the
        prior at ``model.lr_prior`` (default the paper's 2e-5)."""
        t, m = optim or OptimOptions(), self.options
        opts = {"generator": torch.optim.Adam(self.generator.parameters(),
                                              lr=self.lr_of("generator", t),
                                              betas=t.betas, weight_decay=t.weight_decay)}
        if self.tilt is not None:
            opts["prior"] = torch.optim.Adam(self.tilt.parameters(), lr=m.lr_prior,
                                             betas=t.betas, weight_decay=t.weight_decay)
        return {**opts, **self.chains.build_optimizers(t)}

    def training_batch(self, batch: torch.Tensor) -> torch.Tensor:
        """Hook: the data a training step learns from (the text model trims padding)."""
        return batch

    def generator_loss(self, x: torch.Tensor, z: torch.Tensor,
                       ) -> tuple[torch.Tensor, dict[str, float]]:
        """Hook: the generator's loss at posterior samples ``z⁺`` and its extra metrics.

        Images: the official ``Σ_pixels ‖x − g(z⁺)‖² / B`` (σ² is absorbed by Adam), logged
        as ``mse_post`` per pixel. The text subclass returns ``mean −log p_β(x|z⁺)``."""
        sq = (x - self.generator(z)).flatten(1).pow(2).sum(1)
        return sq.mean(), {"mse_post": float(sq.detach().mean()) / x[0].numel()}

    def training_chains(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(z⁺, z⁻)``: the posterior chain, then the prior chain (None without the EBM), each
        from where the chain source starts it (the prior's start is asked for after the
        posterior chain has run: the default source's noise is drawn in that order)."""
        with frozen(self):
            z0 = self.chains.training_posterior_start(x, self.init_z)
        z_pos = self.sample_posterior(x, start=z0)
        if self.tilt is None:
            return z_pos, None
        start = self.chains.training_prior_start(z0, self.init_z)
        return z_pos, self.sample_prior(start.shape[0], start=start)

    def training_step(self, batch, step, optimizers):
        """One learning iteration in the official order: posterior chain, prior chain, the
        chain source's own update (DAMC: amortizer steps on ``(x, z⁺)``), generator step
        (:meth:`generator_loss`), EBM step (contrastive, Eq. 7)."""
        x = self.training_batch(batch)
        z_pos, z_neg = self.training_chains(x)
        metrics = dict(self.chains.learn(x, z_pos, optimizers, step, self.optimizer_step))
        loss_g, extra = self.generator_loss(x, z_pos)
        self.optimizer_step(optimizers["generator"], loss_g, self.generator.parameters())
        metrics.update({"loss": float(loss_g.detach()), **extra})
        if self.tilt is not None:
            out = contrastive_loss(self.prior_energy(z_pos), self.prior_energy(z_neg))
            self.optimizer_step(optimizers["prior"], out.loss, self.tilt.parameters())
            metrics.update({("loss_prior" if k == "loss" else k): v
                            for k, v in out.metrics.items()})
        else:
            with torch.no_grad():
                metrics["energy_pos"] = float(self.prior_energy(z_pos).mean())
        return metrics

    # --- use -----------------------------------------------------------------------------
    @torch.no_grad()
    def sample(self, n, steps=None, generator=None):
        check_sample_args(n, steps, generator)
        steps = steps or self.sample_steps
        return self.generator(self.sample_prior(n, steps, generator))

    def energy_trace(self, n: int, steps: int, every: int = 1,
                     generator: torch.Generator | None = None) -> dict[str, list[float]]:
        """Long-run prior chain with ``E_α`` logged along it (the paper's §5.5 analysis).

        Returns ``step`` and ``energy`` (mean ``E_α`` over ``n`` chains before each logged step)
        and ``energy_std``."""
        out: dict[str, list[float]] = {"step": [], "energy": [], "energy_std": []}

        def log(k: int, z: torch.Tensor, info: LangevinInfo) -> None:
            if k % every == 0 or k == steps - 1:
                out["step"].append(k)
                out["energy"].append(float(info.energy.mean()))
                out["energy_std"].append(float(info.energy.std()))

        self.sample_prior(n, steps, generator, callback=log)
        return out

    @torch.no_grad()
    def reconstruct(self, x: torch.Tensor, steps: int | None = None,
                    generator: torch.Generator | None = None) -> torch.Tensor:
        """``g(z)`` at a posterior sample ``z`` (short-run posterior chain)."""
        x = check_batch(x, self.info, "reconstruct", device=self.device)
        return self.generator(self.sample_posterior(x, steps, generator))

    @torch.no_grad()
    def anomaly_score(self, x: torch.Tensor, steps: int | None = None,
                      generator: torch.Generator | None = None) -> torch.Tensor:
        """Anomaly score at one posterior sample ``z ~ p(z|x)``; higher = more anomalous.

        ``model.anomaly_score: joint`` (default): ``−log p(x, z)`` up to a constant,
        ``‖x − g(z)‖²/(2σ²) − f_α(z) + ‖z‖²/(2σ_p²)`` (the paper thresholds the unnormalised
        ``log p(x, z)``; this is its negative), the reconstruction weighted by σ′
        (``anomaly_llhd_sigma``, default ``llhd_sigma``). ``tilt``: the EBM term ``−f_α(z)``
        alone, i.e. how much the learned prior disfavours the latent code relative to the
        Gaussian. ``unweighted``: ``‖x − g(z)‖² + E_α(z)`` (Yu et al. 2023). See
        :func:`anomaly_scores_from_terms`."""
        m = self.options
        if m.anomaly_score == "tilt" and self.tilt is None:
            raise ConfigError("model.anomaly_score=tilt needs the EBM prior; this model has the "
                              "Gaussian prior (model.prior=gaussian): use joint or unweighted")
        terms = self.anomaly_terms(x, steps, generator)
        return anomaly_scores_from_terms(terms, self.anomaly_sigma)[m.anomaly_score]

    @property
    def anomaly_sigma(self) -> float:
        """σ′ of the joint score: ``anomaly_llhd_sigma``, else the trained ``llhd_sigma``."""
        m = self.options
        return m.anomaly_llhd_sigma if m.anomaly_llhd_sigma is not None else m.llhd_sigma

    @torch.no_grad()
    def anomaly_terms(self, x: torch.Tensor, steps: int | None = None,
                      generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """The terms of every anomaly score at one posterior sample ``z ~ p(z|x)``, each
        ``(B,)``: ``sse`` ``‖x − g(z)‖²``, ``prior`` ``E_α(z)``, ``tilt`` ``−f_α(z)`` (zero
        with the Gaussian prior). :func:`anomaly_scores_from_terms` combines them, so every
        variant (and every σ′) is scored from the same draws."""
        x = check_batch(x, self.info, "anomaly_score", device=self.device)
        z = self.sample_posterior(x, steps, generator)
        tilt = -self.tilt_value(z) if self.tilt is not None else torch.zeros_like(z[:, 0])
        return {"sse": (x - self.generator(z)).flatten(1).pow(2).sum(1),
                "prior": self.prior_energy(z), "tilt": tilt}

    def draw(self, path, n):
        from shortrun.plotting import save_samples

        info = self.require_info("draw")
        if len(info.shape) != 3 and tuple(info.shape) != (2,):  # no picture for this shape
            return
        save_samples(self.sample(n), info, path)
