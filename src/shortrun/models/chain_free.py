"""Data-space EBMs trained without a chain: noise-contrastive estimation (model ``nce``,
Gutmann & Hyvärinen 2010) and energy discrepancy (model ``ed``, Schröder et al. 2023).

Both take the data-space EBM's energy options (``energy: mlp | conv`` and its widths) and
differ from ``ebm`` only in the loss of :meth:`training_step`; the losses live in
:mod:`shortrun.objectives.nce` and :mod:`shortrun.objectives.energy_discrepancy`. ``nce``
learns ``log Z`` as a parameter (``model.log_z``) against a noise fitted to the training data
at the start of a run (its parameters are buffers, so a resumed or loaded run uses the same
noise) or against a noise object the user passes (``NCE(energy, noise=my_noise)``). Samples come
from the library's Langevin kernel started from uniform or normal noise, with optional
independence-MH jumps from that noise first (as ``ebm``'s ``jumps``), so ``mmd`` and pictures
work as for ``ebm``; the density ``kl_grid`` normalises is ``exp(−E)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from shortrun.data.base import DataInfo, LoadedData
from shortrun.energies.mlp import ACTIVATIONS
from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.base import Model, ModelOptions, merge_options
from shortrun.models.density_eval import DensityEvalMixin
from shortrun.models.ebm import build_energy
from shortrun.models.inputs import check_sample_args
from shortrun.objectives.energy_discrepancy import energy_discrepancy
from shortrun.objectives.nce import GaussianNoise, NoiseDistribution, UniformNoise, nce_loss
from shortrun.samplers.independence import independence_mh, noise_log_density
from shortrun.samplers.langevin import langevin
from shortrun.samplers.sources import NoiseSource


@dataclass
class ChainFreeEBMOptions(ModelOptions):
    name: str = fld("ed", choices=("nce", "ed"))
    energy: str = fld("mlp", choices=("mlp", "conv"))
    hidden: int = fld(128, gt=0, doc="MLP width")
    depth: int = fld(2, gt=0, doc="MLP hidden layers")
    nf: int = fld(32, gt=0, doc="conv energy base width (doubles twice)")
    residual: bool = fld(True, doc="conv energy with residual blocks")
    act: str = fld("silu", choices=tuple(ACTIVATIONS))
    spectral_norm: bool = False
    # --- nce ---------------------------------------------------------------------------------
    noise: str = fld("gaussian", choices=("gaussian", "uniform"),
                     doc="nce: the noise, fitted to the training data at the start of a run")
    noise_scale: float = fld(1.0, gt=0, doc="nce gaussian: std multiplier of the fitted "
                             "covariance; nce uniform: margin, a fraction of the box's width")
    noise_ratio: float = fld(1.0, gt=0, doc="nce: ν, noise draws per data point")
    # --- ed ----------------------------------------------------------------------------------
    perturbation: str = fld("auto", choices=("auto", "gaussian", "bernoulli"),
                            doc="ed: auto is bernoulli for {0,1} data, else gaussian")
    ed_t: float = fld(0.25, gt=0, doc="ed gaussian: t, the variance of each perturbation step")
    flip_prob: float = fld(0.1, gt=0, lt=1, doc="ed bernoulli: bit-flip probability per step")
    ed_m: int = fld(16, gt=0, doc="ed: M, negatives per data point")
    ed_w: float = fld(1.0, ge=0, doc="ed: the stabiliser w (0: the plain estimator)")
    # --- sampling (pictures, mmd, `shortrun sample`) ----------------------------------------
    init_noise: str = fld("uniform", choices=("uniform", "normal"))
    init_scale: float = fld(4.0, gt=0, doc="uniform half-width or normal std of sampler starts")
    langevin_steps: int = fld(200, gt=0, doc="sampling chain length")
    step_size: float = fld(0.02, gt=0, doc="Langevin s of the sampler")
    jumps: int = fld(0, ge=0, doc="independence-MH proposals from the start noise per chain "
                                  "before the Langevin run (chains cross between modes)")


class ChainFreeEBM(DensityEvalMixin, Model):
    """One class behind ``nce`` and ``ed``; ``NCE(MyEnergy())`` / ``ED(MyEnergy(), ed_m=32)``.

    The energy maps ``(B, *shape)`` to ``(B,)``; keyword options are ``ChainFreeEBMOptions``
    fields, checked like recipe keys. ``noise`` (NCE only) is any object with
    ``sample(n, generator)`` and a normalised ``log_prob(x)``, e.g.
    :class:`~shortrun.objectives.nce.CustomNoise`; without it the noise named by
    ``options.noise`` is fitted to the training data.
    """

    Config = ChainFreeEBMOptions
    networks = ("energy",)

    def __init__(self, energy: nn.Module, options: ChainFreeEBMOptions | None = None,
                 info: DataInfo | None = None, noise: NoiseDistribution | None = None,
                 **option_values: Any) -> None:
        if options is None and "name" not in option_values and type(self).name:
            option_values["name"] = type(self).name  # NCE(...) is ChainFreeEBM(..., name="nce")
        options = merge_options(ChainFreeEBMOptions, options, option_values)
        if noise is not None and options.name != "nce":
            raise ConfigError(f"a noise distribution is for NCE; model {options.name!r} does "
                              "not use one (drop noise=...)")
        super().__init__(options, info)
        self._given(energy=energy)
        self.energy = energy
        self.user_noise = noise
        # NCE's learned log-normaliser c (Gutmann & Hyvärinen 2010): it converges to log Z
        self.log_z = nn.Parameter(torch.zeros(())) if options.name == "nce" else None
        self._finish_init()

    @classmethod
    def from_config(cls, options: ChainFreeEBMOptions, info: DataInfo) -> ChainFreeEBM:
        model = cls(build_energy(options, info), options, info)
        model.user_networks = ()
        return model

    def setup(self, info: DataInfo) -> None:
        m: ChainFreeEBMOptions = self.options
        bounded = info.kind in ("image", "binary")
        low, high = (info.low, info.high) if bounded else (-m.init_scale, m.init_scale)
        self.start_noise = NoiseSource(info.shape, m.init_noise, low, high, std=m.init_scale)
        self.domain = (info.low, info.high) if bounded else None
        if m.perturbation == "bernoulli" and info.kind != "binary":
            raise ConfigError(f"model.perturbation=bernoulli flips bits; this data is "
                              f"{info.kind!r}: use gaussian (or auto), or binarize the data")
        if m.name == "nce" and self.user_noise is None:
            d = info.dim
            # the fitted noise's parameters: buffers, so a resumed or loaded run has them
            if m.noise == "gaussian":
                self.register_buffer("noise_mean", torch.zeros(d, dtype=torch.float64))
                self.register_buffer("noise_cov", torch.eye(d, dtype=torch.float64))
            else:
                self.register_buffer("noise_low", -torch.ones(info.shape))
                self.register_buffer("noise_high", torch.ones(info.shape))

    def on_train_start(self, data: LoadedData) -> None:
        m: ChainFreeEBMOptions = self.options
        if m.name != "nce" or self.user_noise is not None:
            return
        x = data.train
        if m.noise == "gaussian":
            fitted = GaussianNoise.fit(x, scale=m.noise_scale)
            self.noise_mean.copy_(fitted.mean)
            self.noise_cov.copy_(fitted.chol @ fitted.chol.T)
        else:
            fitted = UniformNoise.fit(x, margin=m.noise_scale)
            self.noise_low.copy_(fitted.low)
            self.noise_high.copy_(fitted.high)

    def noise_distribution(self) -> NoiseDistribution:
        """NCE's noise: the user's, else the one fitted to the data (from the buffers)."""
        if self.user_noise is not None:
            return self.user_noise
        info = self.require_info("noise_distribution")
        if self.options.noise == "gaussian":
            return GaussianNoise(self.noise_mean.cpu(), self.noise_cov.cpu(), tuple(info.shape))
        return UniformNoise(self.noise_low.cpu(), self.noise_high.cpu(), tuple(info.shape))

    def perturbation(self) -> str:
        m: ChainFreeEBMOptions = self.options
        if m.perturbation != "auto":
            return m.perturbation
        return "bernoulli" if self.require_info("training_step").kind == "binary" else "gaussian"

    def training_step(self, batch, step, optimizers):
        m: ChainFreeEBMOptions = self.options
        if m.name == "nce":
            out = nce_loss(self.energy, batch, self.noise_distribution(), self.log_z,
                           noise_ratio=m.noise_ratio)
        else:
            out = energy_discrepancy(self.energy, batch, m=m.ed_m, w=m.ed_w,
                                     perturbation=self.perturbation(), t=m.ed_t,
                                     flip_prob=m.flip_prob)
        norm = self.optimizer_step(optimizers["main"], out.loss)
        metrics = dict(out.metrics)
        if norm is not None:
            metrics["grad_norm"] = norm
        return metrics

    def density_energy(self):
        return self.energy

    @torch.no_grad()
    def sample(self, n, steps=None, generator=None):
        check_sample_args(n, steps, generator)
        m: ChainFreeEBMOptions = self.options
        self.require_info("sample")
        steps = steps or self.sample_steps or m.langevin_steps
        x = self.start_noise.start(n, generator=generator).to(self.device)
        if m.jumps:
            x, _ = independence_mh(self.energy, x,
                                   lambda k: self.start_noise.start(k, generator=generator),
                                   noise_log_density(self.start_noise), m.jumps,
                                   generator=generator)
        x, _ = langevin(self.energy, x, steps, m.step_size, domain=self.domain,
                        generator=generator)
        return x

    def draw(self, path: Path, n: int) -> None:
        if self.require_info("draw").shape == (2,):
            self.draw_2d(self.energy, self.sample(n), path)
        else:
            from shortrun.plotting import save_samples

            save_samples(self.sample(n), self.info, path)


class NCE(ChainFreeEBM):
    """``ChainFreeEBM`` whose default estimator is its registered name (models/registry.py)."""


class ED(ChainFreeEBM):
    """``ChainFreeEBM`` whose default estimator is its registered name (models/registry.py)."""


#: the earlier name of :class:`ChainFreeEBMOptions`
ChainFreeOptions = ChainFreeEBMOptions
