"""Data-space EBM trained by maximum likelihood with short-run Langevin negatives.

The negative phase of ``∇θ log p(x) = E_p[∇θE] − ∇θE(x)`` is estimated with samples from the
library's one Langevin kernel, started from a chain source: noise (short-run, Nijkamp et al.
2019), a replay buffer (Du & Mordatch 2019, IGEBM §3.1), persistent chains (Tieleman 2008) or
the data (CD). Stabilisers (IGEBM §3.3): squared-energy regulariser ``energy_reg``,
parameter-gradient clipping ``train.grad_clip``, Langevin drift clamp ``drift_clamp``,
clamping samples to the data range ``clamp_to_data``. Energies: an MLP for low-dimensional
data, a small conv/ResNet energy for 28×28 and 32×32 images.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from shortrun.data.base import DataInfo, LoadedData
from shortrun.energies.conv import ConvEnergy
from shortrun.energies.guided import GuidedEnergy
from shortrun.energies.mlp import ACTIVATIONS, MLPEnergy
from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.base import Model, ModelOptions, merge_options
from shortrun.models.density_eval import DensityEvalMixin
from shortrun.models.inputs import check_sample_args
from shortrun.objectives.contrastive import contrastive_loss
from shortrun.samplers.independence import independence_mh, noise_log_density
from shortrun.samplers.langevin import langevin
from shortrun.samplers.sources import DataSource, NoiseSource, PersistentChains, ReplayBuffer


@dataclass
class EBMOptions(ModelOptions):
    energy: str = fld("mlp", choices=("mlp", "conv"))
    hidden: int = fld(128, gt=0, doc="MLP width")
    depth: int = fld(2, gt=0, doc="MLP hidden layers")
    nf: int = fld(32, gt=0, doc="conv energy base width (doubles twice)")
    residual: bool = fld(True, doc="conv energy with residual blocks")
    act: str = fld("silu", choices=tuple(ACTIVATIONS))
    spectral_norm: bool = False
    chain: str = fld("buffer", choices=("noise", "buffer", "persistent", "data"))
    buffer_size: int = fld(10_000, gt=0)
    reinit: float = fld(0.05, ge=0.0, le=1.0, doc="replay-buffer fraction restarted from noise")
    pool_size: int = fld(1_000, gt=0, doc="chain: persistent: size of the pool of persistent "
                         "chains; each update draws train.batch_size of them in rotation and "
                         "the others wait (unlike the RBMs' n_chains, which all advance)")
    n_chains: int | None = fld(None, gt=0, doc="old name of pool_size, still accepted: when "
                               "set, it sets pool_size")
    init_noise: str = fld("uniform", choices=("uniform", "normal"))
    init_scale: float = fld(1.0, gt=0, doc="uniform half-width or normal std of fresh chains")
    langevin_steps: int = fld(20, gt=0)
    step_size: float = fld(0.1, gt=0)
    noise_scale: float = fld(1.0, ge=0)
    drift_clamp: float | None = fld(None, gt=0)
    clamp_to_data: bool = fld(True, doc="clamp chains to the data range (images)")
    energy_reg: float = fld(0.0, ge=0)
    jumps: int = fld(0, ge=0, doc="independence-MH proposals from the noise per chain, before "
                                  "each Langevin run (lets chains cross between modes)")
    sample_from: str = fld("noise", choices=("noise", "chains"),
                           doc="`shortrun sample` chains start from fresh noise or from the "
                               "replay buffer / persistent chains")

    def __post_init__(self) -> None:
        # n_chains is the old key of pool_size (config keys are a contract: aliased, not
        # dropped); fold it in so that the saved config names the pool once
        if self.n_chains is not None:
            if self.pool_size not in (1_000, self.n_chains):
                raise ConfigError(f"model.pool_size={self.pool_size} and model.n_chains="
                                  f"{self.n_chains} (its old name) disagree; set only "
                                  "model.pool_size")
            self.pool_size, self.n_chains = self.n_chains, None

    def check(self, cfg) -> None:
        if self.chain == "persistent" and self.pool_size < cfg.train.batch_size:
            raise ConfigError(f"model.pool_size={self.pool_size} (old name model.n_chains) is "
                              f"smaller than train.batch_size={cfg.train.batch_size}; the pool "
                              "hands out one chain per example, so raise model.pool_size")


def build_energy(m: EBMOptions, info: DataInfo) -> torch.nn.Module:
    if m.energy == "conv":
        if len(info.shape) != 3:
            raise ConfigError(f"model.energy=conv needs image data (C, H, W); this dataset has "
                              f"shape {info.shape}: use model.energy=mlp")
        return ConvEnergy(info.shape[0], m.nf, m.act, m.spectral_norm, m.residual)
    return MLPEnergy(info.dim, m.hidden, m.depth, m.act, m.spectral_norm)


class EBM(DensityEvalMixin, Model):
    """Data-space EBM over ``energy`` (an ``nn.Module`` mapping ``(B, *shape)`` to ``(B,)``).

    ``EBM(MyEnergy(), chain="buffer", step_size=0.05)``: keyword options are ``EBMOptions``
    fields, checked like recipe keys; ``info`` may wait for the data (``shortrun.fit``).
    """

    Config = EBMOptions
    networks = ("energy",)

    def __init__(self, energy: torch.nn.Module, options: EBMOptions | None = None,
                 info: DataInfo | None = None, **option_values: Any) -> None:
        super().__init__(merge_options(type(self).Config, options, option_values), info)
        self._given(energy=energy)
        self.energy = energy
        self._finish_init()

    @classmethod
    def from_config(cls, options: EBMOptions, info: DataInfo) -> EBM:
        model = cls(build_energy(options, info), options, info)
        model.user_networks = ()
        return model

    def setup(self, info: DataInfo) -> None:
        m: EBMOptions = self.options
        bounded = info.kind in ("image", "binary")
        low, high = (info.low, info.high) if bounded else (-m.init_scale, m.init_scale)
        self.noise = NoiseSource(info.shape, m.init_noise, low, high, std=m.init_scale)
        self.domain = (info.low, info.high) if (bounded and m.clamp_to_data) else None
        if m.chain == "buffer":
            self.source = ReplayBuffer(m.buffer_size, self.noise, m.reinit)
        elif m.chain == "persistent":
            self.source = PersistentChains(m.pool_size, torch.zeros((m.pool_size, *info.shape)))
        elif m.chain == "data":
            self.source = DataSource()
        else:
            self.source = self.noise

    def on_train_start(self, data: LoadedData) -> None:
        if isinstance(self.source, PersistentChains):
            self.source.chains.copy_(self.noise.start(self.source.chains.shape[0]))

    def run_chain(self, x0: torch.Tensor, steps: int | None = None,
                  generator: torch.Generator | None = None,
                  energy: torch.nn.Module | None = None) -> torch.Tensor:
        """Langevin for ``steps`` on ``energy`` (default the model's); with ``jumps`` > 0,
        independence-MH jumps open every block of ``langevin_steps`` Langevin steps."""
        m: EBMOptions = self.options
        energy = self.energy if energy is None else energy
        steps = steps or m.langevin_steps
        block = m.langevin_steps if m.jumps else steps
        x, done = x0, 0
        while done < steps:
            if m.jumps:
                x, self.last_jump = independence_mh(
                    energy, x, lambda n: self.noise.start(n, generator=generator),
                    noise_log_density(self.noise), m.jumps, generator=generator)
            k = min(block, steps - done)
            x, _ = langevin(energy, x, k, m.step_size, m.noise_scale,
                            drift_clamp=m.drift_clamp, domain=self.domain, generator=generator)
            done += k
        return x

    def training_step(self, batch, step, optimizers):
        m: EBMOptions = self.options
        x0 = self.source.start(batch.shape[0], data=batch)
        x_neg = self.run_chain(x0.to(batch))
        self.source.finish(x_neg)
        out = contrastive_loss(self.energy(batch), self.energy(x_neg),
                               energy_reg=m.energy_reg, x_neg=x_neg)
        norm = self.optimizer_step(optimizers["main"], out.loss)
        metrics = dict(out.metrics)
        if norm is not None:
            metrics["grad_norm"] = norm
        if m.jumps:
            metrics["jump_accept"] = self.last_jump.mean_acceptance
        return metrics

    def _chain_states(self, n: int, generator: torch.Generator | None) -> torch.Tensor | None:
        store = getattr(self.source, "store", getattr(self.source, "chains", None))
        if store is None:
            return None
        if isinstance(self.source, ReplayBuffer) and not bool(self.source.filled):
            return None
        idx = torch.randint(store.shape[0], (n,), generator=generator).to(store.device)
        return store[idx].clone()

    @torch.no_grad()
    def sample(self, n, steps=None, generator=None, y: Any = None,
               classifier: torch.nn.Module | None = None, guidance: float = 0.0):
        """``n`` samples of ``p(x)``; with ``y`` (one class or one per sample) and a
        ``classifier`` returning logits, of ``p(x|y) ∝ p(x) p(y|x)``: Langevin on
        ``E(x) − (1 + guidance) log p(y|x)`` (:class:`GuidedEnergy`; guidance 0 is exact)."""
        check_sample_args(n, steps, generator)
        self.require_info("sample")
        energy = None if y is None else self._guided(n, y, classifier, guidance)
        steps = steps or self.sample_steps or self.options.langevin_steps
        x0 = None
        if self.options.sample_from == "chains":
            x0 = self._chain_states(n, generator)
        if x0 is None:
            x0 = self.noise.start(n, generator=generator)
        return self.run_chain(x0.to(self.device), steps, generator, energy)

    def _guided(self, n: int, y: Any, classifier: torch.nn.Module | None,
                guidance: float) -> GuidedEnergy:
        if classifier is None:
            raise ConfigError("EBM.sample(y=...): class-conditional sampling needs "
                              "classifier=, a module returning logits over the classes (e.g. a "
                              "trained shortrun.JEM or Classifier)")
        if guidance < 0:
            raise ConfigError(f"guidance: must be >= 0 (0 is exact p(x|y)); got {guidance}")
        labels = torch.as_tensor(y, dtype=torch.long).reshape(-1)
        labels = labels.expand(n) if labels.numel() == 1 else labels
        if labels.numel() != n or int(labels.min()) < 0:
            raise ConfigError(f"y: give one class (>= 0) or one label per sample ({n}); got "
                              f"{labels.numel()} labels from {int(labels.min())}")
        return GuidedEnergy(self.energy, classifier, labels.to(self.device), guidance)

    def draw(self, path: Path, n: int) -> None:
        if self.require_info("draw").shape == (2,):
            self.draw_2d(self.energy, self.sample(n), path)
        else:
            from shortrun.plotting import save_samples

            save_samples(self.sample(n), self.info, path)

    def density_energy(self):
        return self.energy
