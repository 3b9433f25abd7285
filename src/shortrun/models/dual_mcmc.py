"""Dual-MCMC teaching (Cui & Han, "Learning Energy-Based Model via Dual-MCMC Teaching",
NeurIPS 2023): a data-space EBM, a generator and an inference network trained jointly.

Three models and two chains, both through the library's one Langevin kernel:

- **x-chain** (Eq. 7): EBM-revised samples ``x̃ = K_x(x₀)`` started at generator samples
  ``x₀ = g_θ(z)``, ``z ~ N(0, I)``, on the energy ``E_α(x)``.
- **z-chain** (Eq. 10): posterior-revised latents ``z̃ = K_z(z₀)`` started at inference samples
  ``z₀ ~ q_φ(z|x)``, on the negative log joint of the generator
  ``U(z) = ‖x − g_θ(z)‖² / (2σ²) + ‖z‖² / (2σ_p²)``.

Updates per batch, in the order of the released script:

1. generator on both revised pairs (Eq. 10): ``G·‖x − g(z̃)‖² + S·‖x̃ − g(z)‖²``;
2. inference network on both pairs (Eq. 15): ``−G·log q(z̃|x) − I·log q(z|x̃)``;
3. EBM (Eq. 7) on data vs revised samples: with ``resample_x`` (the script's ``fine_tune``) the
   x-chain is re-run from the *updated* generator at the same ``z``, else this batch's ``x̃`` are
   reused; the loss is optionally scaled by ``1/T`` (``temperature``).

Sign convention: the paper writes ``π_α(x) ∝ exp(f_α(x))``; this file uses ``E_α = −f_α`` once
and for all, so the MLE gradient of Eq. 7, ``E_data[∂f] − E_π[∂f]``, is the contrastive loss
``mean E(x) − mean E(x̃)`` minimised here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from shortrun.data.base import DataInfo
from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.base import Model, ModelOptions, OptimOptions, merge_options
from shortrun.models.dual_nets import GaussianEncoder, ResGenerator, ResNetEnergy, gaussian_nll
from shortrun.models.inputs import check_batch, check_sample_args
from shortrun.objectives.contrastive import contrastive_loss
from shortrun.samplers.langevin import langevin


@dataclass
class DualMCMCOptions(ModelOptions):
    nz: int = fld(128, gt=0, doc="latent size")
    sigma: float = fld(0.3, gt=0, doc="σ of p(x|z) = N(g(z), σ²I)")
    prior_sigma: float = fld(1.0, gt=0, doc="σ_p of p(z) = N(0, σ_p²I)")
    ebm_channels: int = fld(64, gt=0, doc="width of the energy ResNet (paper: 512 / 1024)")
    gen_channels: int = fld(128, gt=0, doc="width of the generator (paper: 512 / 1024)")
    inf_channels: int = fld(32, gt=0, doc="first width of the inference net (paper: 128)")
    gen_norm: str = fld("batch", choices=("batch", "none"))
    gen_taper: bool = fld(False, doc="halve the generator width at every up-block (CPU)")
    spectral_norm: bool = fld(True, doc="spectral norm on every energy layer")
    x_steps: int = fld(30, ge=0, doc="K_x, x-chain length")
    x_step_size: float = fld(0.5, gt=0, doc="s_x")
    x_noise: float = fld(0.001, ge=0, doc="n_x, std of the x-chain noise per step")
    z_steps: int = fld(10, ge=0, doc="K_z, z-chain length")
    z_step_size: float = fld(0.1, gt=0, doc="s_z")
    z_noise: float = fld(0.1, ge=0, doc="n_z, std of the z-chain noise per step")
    g_factor: float = fld(1.0, ge=0, doc="Gfactor: weight of the data pair (x, z̃)")
    s_factor: float = fld(50.0, ge=0, doc="Sfactor: weight of the sample pair (x̃, z) for g")
    i_factor: float = fld(0.1, ge=0, doc="Ifactor: weight of the sample pair (x̃, z) for q")
    temperature: bool = fld(True, doc="divide the EBM loss by T = (n_x/s_x)²")
    resample_x: bool = fld(True, doc="EBM negatives: re-run the x-chain from the updated g")
    clamp_x: bool = fld(False, doc="clamp x-chain states to the data range")
    lr_ebm: float | None = fld(None, gt=0, doc="default train.lr")
    lr_generator: float | None = fld(None, gt=0, doc="default train.lr")
    lr_inference: float | None = fld(None, gt=0, doc="default train.lr")
    weight_decay_ebm: float | None = fld(None, ge=0, doc="default train.weight_decay")
    weight_decay_generator: float | None = fld(None, ge=0, doc="default train.weight_decay")
    weight_decay_inference: float | None = fld(None, ge=0, doc="default train.weight_decay")


class DualMCMC(Model):
    """EBM ``E_α``, generator ``g_θ`` and inference net ``q_φ``, taught by each other's MCMC."""

    Config = DualMCMCOptions
    ORDER = ("generator", "inference", "ebm")
    networks = ("ebm", "generator", "inference")

    def __init__(self, ebm: nn.Module, generator: nn.Module, inference: nn.Module,
                 options: DualMCMCOptions | None = None, info: DataInfo | None = None,
                 **option_values: Any) -> None:
        """``ebm``: ``(B, *shape) → (B,)``; ``generator``: ``(B, nz) → (B, *shape)``;
        ``inference``: ``(B, *shape) → (mean, logvar)`` of ``q(z|x)``, each ``(B, nz)``.
        Keyword options are ``DualMCMCOptions`` fields (``nz`` must match the networks)."""
        super().__init__(merge_options(type(self).Config, options, option_values), info)
        self._given(ebm=ebm, generator=generator, inference=inference)
        self.ebm = ebm
        self.generator = generator
        self.inference = inference
        self._finish_init()

    @staticmethod
    def check_info(info: DataInfo) -> None:
        if info.kind != "image":
            raise ConfigError(f"model dual_mcmc: needs real-valued images (data kind 'image'); "
                              f"this data is of kind {info.kind!r}")

    @classmethod
    def from_config(cls, options: DualMCMCOptions, info: DataInfo) -> DualMCMC:
        cls.check_info(info)
        m = options
        ebm = ResNetEnergy(info.shape, m.ebm_channels, m.spectral_norm)
        generator = ResGenerator(info.shape, m.nz, m.gen_channels, m.gen_norm, m.gen_taper)
        inference = GaussianEncoder(info.shape, m.nz, m.inf_channels)
        model = cls(ebm, generator, inference, options, info)
        model.user_networks = ()
        return model

    def setup(self, info: DataInfo) -> None:
        self.check_info(info)

    # ------------------------------------------------------------------ the two chains
    @property
    def x_noise_scale(self) -> float:
        """The script's x-chain adds ``n_x·ξ`` per step; our kernel adds ``s·τ·ξ``, so
        ``τ = n_x / s_x``. The chain then targets ``exp(−E/T)`` with ``T = τ²``."""
        m = self.options
        return m.x_noise / m.x_step_size

    @property
    def temperature(self) -> float:
        return self.x_noise_scale**2 if self.x_noise_scale > 0 else 1.0

    def revise_x(self, x0: torch.Tensor, steps: int | None = None,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """The x-chain (Eq. 7's MCMC revision of generator samples) on ``E_α``."""
        m: DualMCMCOptions = self.options
        domain = (self.info.low, self.info.high) if m.clamp_x else None
        x, _ = langevin(self.ebm, x0, m.x_steps if steps is None else steps, m.x_step_size,
                        self.x_noise_scale, domain=domain, generator=generator)
        return x

    def posterior_energy(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``U(z) = −log p_θ(x, z) + const = ‖x − g(z)‖²/(2σ²) + ‖z‖²/(2σ_p²)``, per row.

        The released script steps on ``‖x − g(z)‖²/σ²`` (twice this likelihood term, i.e. an
        effective ``σ/√2``); this is the log joint the paper writes (Eq. 10)."""
        m: DualMCMCOptions = self.options
        resid = (x - self.generator(z)).flatten(1)
        return (resid**2).sum(1) / (2 * m.sigma**2) + (z**2).sum(1) / (2 * m.prior_sigma**2)

    def revise_z(self, z0: torch.Tensor, x: torch.Tensor, steps: int | None = None,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """The z-chain (Eq. 10's MCMC revision of inference samples) on ``U(z)``; the script's
        noise ``n_z·ξ`` is ``τ = n_z / s_z`` here (τ = 1, exact Langevin, at the paper's values)."""
        m: DualMCMCOptions = self.options
        z, _ = langevin(lambda z: self.posterior_energy(z, x), z0,
                        m.z_steps if steps is None else steps, m.z_step_size,
                        m.z_noise / m.z_step_size, generator=generator)
        return z

    # ------------------------------------------------------------------ training
    def build_optimizers(self, optim: OptimOptions | None = None,
                         ) -> dict[str, torch.optim.Optimizer]:
        """One Adam per network; lr / weight decay fall back to ``train.*`` when unset."""
        m, t = self.options, optim or OptimOptions()
        nets = {"generator": self.generator, "inference": self.inference, "ebm": self.ebm}
        out = {}
        for name in self.ORDER:
            lr = getattr(m, f"lr_{name}")
            wd = getattr(m, f"weight_decay_{name}")
            out[name] = torch.optim.Adam(nets[name].parameters(), lr=t.lr if lr is None else lr,
                                         betas=t.betas,
                                         weight_decay=t.weight_decay if wd is None else wd)
        return out

    def training_step(self, batch, step, optimizers):
        m: DualMCMCOptions = self.options
        x, n = batch, batch.shape[0]
        z = torch.randn(n, m.nz, device=x.device)
        x_gen = self.generator(z)
        mean, logvar = self.inference(x)
        z0 = mean + torch.exp(0.5 * logvar) * torch.randn_like(mean)
        z_rev = self.revise_z(z0.detach(), x)
        x_rev = self.revise_x(x_gen.detach())

        # 1. generator (Eq. 10): both revised pairs; sums over pixels, mean over the batch
        loss_recon = ((x - self.generator(z_rev)) ** 2).flatten(1).sum(1).mean()
        loss_sample = ((x_rev - x_gen) ** 2).flatten(1).sum(1).mean()
        loss_g = m.g_factor * loss_recon + m.s_factor * loss_sample
        self.optimizer_step(optimizers["generator"], loss_g)

        # 2. inference network (Eq. 15): both pairs, by maximum likelihood of q_φ
        nll_post = gaussian_nll(z_rev, mean, logvar).mean()
        nll_latent = gaussian_nll(z, *self.inference(x_rev)).mean()
        loss_i = m.g_factor * nll_post + m.i_factor * nll_latent
        self.optimizer_step(optimizers["inference"], loss_i)

        # 3. EBM (Eq. 7): data vs revised samples; with resample_x (the script's fine_tune),
        # those of the generator just updated, else this batch's x̃ (one x-chain fewer)
        x_neg = x_rev
        if m.resample_x:
            with torch.no_grad():
                x_neg = self.revise_x(self.generator(z))
        out = contrastive_loss(self.ebm(x), self.ebm(x_neg.detach()))
        loss_e = out.loss / self.temperature if m.temperature else out.loss
        self.optimizer_step(optimizers["ebm"], loss_e)

        metrics = dict(out.metrics)
        scalars = {"loss_generator": loss_g, "loss_recon": loss_recon, "loss_sample": loss_sample,
                   "loss_inference": loss_i, "nll_posterior": nll_post, "nll_latent": nll_latent}
        metrics.update({k: float(v.detach()) for k, v in scalars.items()})
        return metrics

    # ------------------------------------------------------------------ use
    @torch.no_grad()
    def sample_generator(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Samples of the generator alone, ``g(z)``, ``z ~ N(0, I)``."""
        z = torch.randn(n, self.options.nz, generator=generator, device=self.device)
        return self.generator(z)

    def sample(self, n, steps=None, generator=None):
        """EBM-revised samples: the x-chain from generator samples (``sample.steps`` or K_x)."""
        check_sample_args(n, steps, generator)
        steps = steps or self.sample_steps or self.options.x_steps
        return self.revise_x(self.sample_generator(n, generator), steps, generator).detach()

    def reconstruct(self, x: torch.Tensor, chain: bool = True,
                    generator: torch.Generator | None = None) -> torch.Tensor:
        """``g(μ_φ(x))`` (inference net alone) or ``g(z̃)`` with the z-chain from ``μ_φ(x)``."""
        x = check_batch(x, self.info, "reconstruct", device=self.device)
        with torch.no_grad():
            z = self.inference(x)[0]
        if chain:
            z = self.revise_z(z, x, generator=generator)
        with torch.no_grad():
            return self.generator(z)

    def draw(self, path: Path, n: int) -> None:
        """``path``: EBM-revised samples; ``*_generator.png`` beside it: the generator's."""
        from shortrun.plotting import save_samples

        z = torch.randn(n, self.options.nz, device=self.device)
        with torch.no_grad():
            x_gen = self.generator(z)
        save_samples(self.revise_x(x_gen, self.sample_steps), self.require_info("draw"), path)
        save_samples(x_gen, self.info, path.with_name(f"{path.stem}_generator.png"))
