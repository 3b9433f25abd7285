"""Data-space EBM trained by maximum likelihood with short-run Langevin negatives.

The negative phase of ``∇θ log p(x) = E_p[∇θE] − ∇θE(x)`` is estimated with samples from the
library's one Langevin kernel, started from a chain source: noise (short-run, Nijkamp et al.
2019), a replay buffer (Du & Mordatch 2019), persistent chains (Tieleman 2008) or the data (CD).
Stabilisers: squared-energy regulariser, parameter-gradient clipping, drift clamp, clamping
samples to the data range.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from shortrun.data.base import DataInfo, LoadedData
from shortrun.energies.mlp import ACTIVATIONS, MLPEnergy
from shortrun.models.base import Model, ModelOptions
from shortrun.objectives.contrastive import contrastive_loss
from shortrun.samplers.langevin import langevin
from shortrun.samplers.sources import DataSource, NoiseSource, PersistentChains, ReplayBuffer
from shortrun.train.fields import fld


@dataclass
class EBMOptions(ModelOptions):
    name: str = fld("ebm")
    energy: str = fld("mlp", choices=("mlp",))
    hidden: int = fld(128, gt=0)
    depth: int = fld(2, gt=0)
    act: str = fld("silu", choices=tuple(ACTIVATIONS))
    spectral_norm: bool = False
    chain: str = fld("buffer", choices=("noise", "buffer", "persistent", "data"))
    buffer_size: int = fld(10_000, gt=0)
    reinit: float = fld(0.05, ge=0.0, le=1.0, doc="replay-buffer fraction restarted from noise")
    n_chains: int = fld(1_000, gt=0, doc="persistent chains (chain: persistent)")
    init_noise: str = fld("uniform", choices=("uniform", "normal"))
    init_scale: float = fld(1.0, gt=0, doc="uniform half-width or normal std of fresh chains")
    langevin_steps: int = fld(20, gt=0)
    step_size: float = fld(0.1, gt=0)
    noise_scale: float = fld(1.0, ge=0)
    drift_clamp: float | None = fld(None, gt=0)
    clamp_to_data: bool = fld(True, doc="clamp chains to the data range (images)")
    energy_reg: float = fld(0.0, ge=0)


class EBM(Model):
    name = "ebm"
    Config = EBMOptions
    metrics = ("kl_grid", "loglik_grid")
    default_metrics = ("kl_grid", "loglik_grid")

    def __init__(self, cfg, info: DataInfo) -> None:
        super().__init__(cfg, info)
        m: EBMOptions = cfg.model
        self.energy = MLPEnergy(info.dim, m.hidden, m.depth, m.act, m.spectral_norm)
        bounded = info.kind in ("image", "binary")
        low, high = (info.low, info.high) if bounded else (-m.init_scale, m.init_scale)
        self.noise = NoiseSource(info.shape, m.init_noise, low, high, std=m.init_scale)
        self.domain = (info.low, info.high) if (bounded and m.clamp_to_data) else None
        if m.chain == "buffer":
            self.source = ReplayBuffer(m.buffer_size, self.noise, m.reinit)
        elif m.chain == "persistent":
            self.source = PersistentChains(m.n_chains, torch.zeros((m.n_chains, *info.shape)))
        elif m.chain == "data":
            self.source = DataSource()
        else:
            self.source = self.noise

    def on_train_start(self, data: LoadedData) -> None:
        if isinstance(self.source, PersistentChains):
            self.source.chains.copy_(self.noise.start(self.source.chains.shape[0]))

    def run_chain(self, x0: torch.Tensor, steps: int | None = None) -> torch.Tensor:
        m: EBMOptions = self.cfg.model
        x, _ = langevin(self.energy, x0, steps or m.langevin_steps, m.step_size, m.noise_scale,
                        drift_clamp=m.drift_clamp, domain=self.domain)
        return x

    def training_step(self, batch, step, optimizers):
        m: EBMOptions = self.cfg.model
        x0 = self.source.start(batch.shape[0], data=batch)
        x_neg = self.run_chain(x0)
        self.source.finish(x_neg)
        out = contrastive_loss(self.energy(batch), self.energy(x_neg),
                               energy_reg=m.energy_reg, x_neg=x_neg)
        norm = self.optimizer_step(optimizers["main"], out.loss)
        metrics = dict(out.metrics)
        if norm is not None:
            metrics["grad_norm"] = norm
        return metrics

    @torch.no_grad()
    def sample(self, n, steps=None, generator=None):
        steps = steps or self.cfg.sample.steps or self.cfg.model.langevin_steps
        return self.run_chain(self.noise.start(n, generator=generator), steps)

    def draw(self, path: Path, n: int) -> None:
        from shortrun.train.images import save_density_2d, save_samples

        x = self.sample(n)
        if self.info.shape == (2,):
            save_density_2d(self.energy, x, path)
        else:
            save_samples(x, self.info, path)

    def evaluate(self, metrics, data, run_dir):
        from shortrun.estimators.grid import grid_metrics

        return grid_metrics(self.energy, data, metrics)
