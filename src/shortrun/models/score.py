"""Energies trained by score matching: no MCMC during training, no partition function.

Model names: ``sm`` (exact, Hyvärinen 2005), ``ssm`` (sliced, Song et al. 2019) and ``dsm``
(denoising, Vincent 2011; with ``n_sigmas > 1`` a geometric σ ladder, Song & Ermon 2019, and
with ``conditional: true`` a noise-conditional energy ``E(x, σ)``). The objectives live in
:mod:`shortrun.objectives.score_matching`. Samples come from the library's one Langevin kernel;
a noise-conditional energy is sampled with annealed Langevin over its ladder (Song & Ermon
2019, Alg. 1, step ``α_i = ε σ_i² / σ_L²``, i.e. ``s_i = √(2ε) σ_i / σ_L`` in our
parametrisation). The density that ``kl_grid`` normalises is ``exp(−E(x))``, or
``exp(−E(x, σ_min))`` for a noise-conditional energy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from shortrun.data.base import DataInfo
from shortrun.energies.conditional import AtSigma, NoiseConditionalEnergy
from shortrun.energies.mlp import ACTIVATIONS, MLPEnergy
from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.base import Model, ModelOptions, merge_options
from shortrun.models.density_eval import DensityEvalMixin
from shortrun.models.inputs import check_sample_args
from shortrun.objectives.score_matching import (
    denoising_score_matching,
    exact_score_matching,
    geometric_sigmas,
    ladder_score_matching,
    sliced_score_matching,
)
from shortrun.samplers.langevin import langevin
from shortrun.samplers.sources import NoiseSource


@dataclass
class ScoreModelOptions(ModelOptions):
    name: str = fld("dsm", choices=("dsm", "ssm", "sm"))
    hidden: int = fld(128, gt=0)
    depth: int = fld(2, gt=0)
    act: str = fld("silu", choices=tuple(ACTIVATIONS))
    sigma: float = fld(0.1, gt=0, doc="dsm: the noise level when n_sigmas is 1")
    n_sigmas: int = fld(1, gt=0, doc="dsm: levels of the geometric σ ladder")
    sigma_max: float = fld(1.0, gt=0, doc="dsm ladder: largest σ")
    sigma_min: float = fld(0.05, gt=0, doc="dsm ladder: smallest σ (where kl_grid is read)")
    conditional: bool = fld(False, doc="dsm ladder: noise-conditional energy E(x, σ)")
    projections: int = fld(1, gt=0, doc="ssm: projections per example")
    projection: str = fld("rademacher", choices=("rademacher", "gaussian"))
    variance_reduced: bool = fld(True, doc="ssm: the variance-reduced form (SSM-VR)")
    init_noise: str = fld("uniform", choices=("uniform", "normal"))
    init_scale: float = fld(4.0, gt=0, doc="uniform half-width or normal std of sampler starts")
    langevin_steps: int = fld(500, gt=0, doc="sampling chain length (per level if annealed)")
    step_size: float = fld(0.02, gt=0, doc="Langevin s (annealed: s at σ_min)")

    def check(self, cfg) -> None:
        if self.n_sigmas > 1 and self.sigma_min >= self.sigma_max:
            raise ConfigError(f"model.sigma_min={self.sigma_min} must be below "
                              f"model.sigma_max={self.sigma_max} for a σ ladder")
        if self.conditional and (self.name != "dsm" or self.n_sigmas < 2):
            raise ConfigError("model.conditional: a noise-conditional energy needs model.name=dsm "
                              "and a σ ladder (model.n_sigmas >= 2)")


ScoreOptions = ScoreModelOptions  # the earlier name, kept as an alias


class ScoreModel(DensityEvalMixin, Model):
    """One model class behind the three names; ``options.name`` picks the objective.

    ``DSM(MyEnergy(), sigma=0.1)``: the energy maps ``(B, d)`` to ``(B,)`` (with
    ``conditional: true``, ``(x, sigma)`` to ``(B,)``); keyword options are ``ScoreModelOptions``
    fields. The class picks the objective's default name (``SSM(...)`` is sliced SM).
    """

    Config = ScoreModelOptions
    networks = ("energy",)

    def __init__(self, energy: torch.nn.Module, options: ScoreModelOptions | None = None,
                 info: DataInfo | None = None, **option_values: Any) -> None:
        if options is None and "name" not in option_values and type(self).name:
            option_values["name"] = type(self).name  # DSM(...) is ScoreModel(..., name="dsm")
        super().__init__(merge_options(ScoreModelOptions, options, option_values), info)
        self._given(energy=energy)
        self.energy = energy
        self._finish_init()

    @classmethod
    def from_config(cls, options: ScoreModelOptions, info: DataInfo) -> ScoreModel:
        m = options
        if m.conditional:
            energy = NoiseConditionalEnergy(info.dim, m.hidden, m.depth, m.act)
        else:
            energy = MLPEnergy(info.dim, m.hidden, m.depth, m.act)
        model = cls(energy, options, info)
        model.user_networks = ()
        return model

    def setup(self, info: DataInfo) -> None:
        m: ScoreModelOptions = self.options
        self.register_buffer("sigmas", geometric_sigmas(m.sigma_max, m.sigma_min, m.n_sigmas)
                             if m.n_sigmas > 1 else torch.tensor([m.sigma]))
        self.noise = NoiseSource(info.shape, m.init_noise, -m.init_scale, m.init_scale,
                                 std=m.init_scale)

    def _cond_energy(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        return self.energy(x, sigma) if self.options.conditional else self.energy(x)

    def training_step(self, batch, step, optimizers):
        m: ScoreModelOptions = self.options
        if m.name == "sm":
            out = exact_score_matching(self.energy, batch)
        elif m.name == "ssm":
            out = sliced_score_matching(self.energy, batch, m.projections, m.projection,
                                        m.variance_reduced)
        elif m.n_sigmas > 1:
            out = ladder_score_matching(self._cond_energy, batch, self.sigmas)
        else:
            out = denoising_score_matching(self.energy, batch, m.sigma)
        self.optimizer_step(optimizers["main"], out.loss)
        return dict(out.metrics)

    def density_energy(self):
        if self.options.conditional:
            return AtSigma(self.energy, float(self.sigmas[-1]))
        return self.energy

    @torch.no_grad()
    def sample(self, n, steps=None, generator=None):
        check_sample_args(n, steps, generator)
        m: ScoreModelOptions = self.options
        self.require_info("sample")
        steps = steps or self.sample_steps or m.langevin_steps
        x = self.noise.start(n, generator=generator).to(self.device)
        if not m.conditional:
            x, _ = langevin(self.energy, x, steps, m.step_size, generator=generator)
            return x
        sigma_last = float(self.sigmas[-1])
        for sigma in self.sigmas.tolist():
            s = m.step_size * sigma / sigma_last
            x, _ = langevin(AtSigma(self.energy, sigma), x, max(1, steps // len(self.sigmas)),
                            s, generator=generator)
        return x

    def draw(self, path: Path, n: int) -> None:
        if self.require_info("draw").shape != (2,):
            return super().draw(path, n)
        self.draw_2d(self.density_energy(), self.sample(n), path)


# ``DSM``, ``SSM`` and ``SM`` are shorthand for ``ScoreModel`` with that objective as the default
# ``name`` (``SSM(energy)`` is ``ScoreModel(energy, name="ssm")``); the registry builds them by
# name. ScoreModel is the one documented class.
class DSM(ScoreModel):
    """``ScoreModel`` whose default objective is its registered name (models/registry.py)."""


class SSM(ScoreModel):
    """``ScoreModel`` whose default objective is its registered name (models/registry.py)."""


class SM(ScoreModel):
    """``ScoreModel`` whose default objective is its registered name (models/registry.py)."""


