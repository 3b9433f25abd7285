"""Joint Energy-based Model: a classifier read as an energy (Grathwohl et al. 2020).

The logits ``f(x)`` of any classifier define ``E(x, y) = −f(x)[y]`` and
``E(x) = −logsumexp_y f(x)[y]`` (paper Eq. 4-5 with ``f = −E``, translated in
:mod:`shortrun.energies.guided`); ``p(y|x)`` is the softmax of the logits. Training (paper
Eq. 7) maximises ``log p(y|x) + log p(x)``: the cross-entropy on labelled examples plus
``generative_weight`` × the contrastive loss of ``E(x)`` (:func:`contrastive_loss`, the library's
one maximum-likelihood gradient) with negatives from short-run SGLD (the library's one Langevin
kernel) started from a replay buffer (:class:`ReplayBuffer`, paper §4 "PCD with a replay
buffer"). Examples labelled :data:`UNLABELLED` (−1) enter the generative term only.

Stabilisers (options): ``energy_reg`` (the L2 energy penalty of Du & Mordatch 2019 §3.3),
``reinit`` (the buffer's restart rate, the paper's ρ = 0.05), ``step_size`` and
``noise_scale`` decoupled (the paper's SGLD takes a drift of α = 1 and a noise of 0.01, not the
Langevin pair; ``step_size = √2``, ``noise_scale = 0.01/√2`` is that). ``generative_weight: 0``
leaves a plain classifier of the same network, the baseline of docs/jem.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from shortrun.data.base import DataInfo, LoadedData
from shortrun.energies.guided import JointLogitEnergy, LogitEnergy
from shortrun.energies.mlp import ACTIVATIONS, activation
from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.base import Model, ModelOptions, merge_options
from shortrun.models.density_eval import DensityEvalMixin
from shortrun.models.inputs import check_batch, check_sample_args
from shortrun.objectives.contrastive import LossOutput, contrastive_loss
from shortrun.samplers.langevin import langevin
from shortrun.samplers.sources import NoiseSource, ReplayBuffer

#: label of an example that enters only the generative term
UNLABELLED = -1


@dataclass
class JEMOptions(ModelOptions):
    n_classes: int = fld(10, gt=1)
    width: int = fld(32, gt=0, doc="recipe network: conv channels of the first block (images) "
                                   "or MLP width (vectors)")
    depth: int = fld(2, gt=0, doc="recipe network: MLP hidden layers (vectors)")
    act: str = fld("silu", choices=tuple(ACTIVATIONS))
    generative_weight: float = fld(1.0, ge=0.0, doc="weight of the log p(x) term; 0: a plain "
                                                    "classifier of the same network")
    chain: str = fld("buffer", choices=("buffer", "noise"))
    buffer_size: int = fld(10_000, gt=0)
    reinit: float = fld(0.05, ge=0.0, le=1.0, doc="replay-buffer fraction restarted from noise")
    init_noise: str = fld("uniform", choices=("uniform", "normal"))
    init_scale: float = fld(1.0, gt=0, doc="uniform half-width or normal std of fresh chains "
                                           "(vectors; images start uniform on the data range)")
    langevin_steps: int = fld(20, gt=0)
    step_size: float = fld(1.4142, gt=0, doc="drift ½s²∇E; √2 is the paper's α = 1")
    noise_scale: float = fld(0.00707, ge=0, doc="noise s·τ; 0.00707·√2 = the paper's 0.01")
    drift_clamp: float | None = fld(None, gt=0)
    clamp_to_data: bool = fld(True, doc="clamp chains to the data range (images)")
    energy_reg: float = fld(0.0, ge=0, doc="L2 energy penalty λ(E(x⁺)² + E(x⁻)²)")
    sample_from: str = fld("chains", choices=("noise", "chains"),
                           doc="sample() chains start from fresh noise or the replay buffer")
    guidance: float = fld(0.0, ge=0, doc="class-conditional sampling: E(x) − (1+w) log p(y|x); "
                                         "0 is exactly E(x, y)")


class ConvLogits(nn.Module):
    """A small conv classifier without batch norm (the paper drops it: chains and data in one
    batch must not share statistics): two stride-2 convolutions, a hidden layer, the logits.
    Sized for CPU: every SGLD step is a forward and a backward pass of it."""

    def __init__(self, channels: int, side: int, n_classes: int, width: int = 32,
                 act: str = "silu") -> None:
        super().__init__()
        w = width
        self.net = nn.Sequential(
            nn.Conv2d(channels, w, 4, stride=2, padding=1), activation(act),
            nn.Conv2d(w, 2 * w, 4, stride=2, padding=1), activation(act), nn.Flatten(),
            nn.Linear(2 * w * (side // 4) ** 2, 4 * w), activation(act),
            nn.Linear(4 * w, n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def mlp_logits(dim: int, n_classes: int, width: int, depth: int, act: str) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Flatten()]
    for i in range(depth):
        layers += [nn.Linear(dim if i == 0 else width, width), activation(act)]
    return nn.Sequential(*layers, nn.Linear(width, n_classes))


def build_logits(m: JEMOptions, info: DataInfo) -> nn.Module:
    if len(info.shape) == 3 and info.shape[1] == info.shape[2] and info.shape[1] % 4 == 0:
        return ConvLogits(info.shape[0], info.shape[1], m.n_classes, m.width, m.act)
    return mlp_logits(info.dim, m.n_classes, m.width, m.depth, m.act)


def jem_loss(logits_pos: torch.Tensor, y: torch.Tensor, logits_neg: torch.Tensor | None,
             generative_weight: float = 1.0, energy_reg: float = 0.0) -> LossOutput:
    """``CE(f(x), y)`` over labelled rows + ``w`` × contrastive loss of ``E = −LSE f``.

    Rows labelled :data:`UNLABELLED` enter only the generative term; ``logits_neg`` are the
    logits at the chains' end states (held fixed: no gradient flows through the chain)."""
    labelled = y != UNLABELLED
    ce = (F.cross_entropy(logits_pos[labelled], y[labelled]) if bool(labelled.any())
          else logits_pos.sum() * 0.0)
    metrics: dict[str, float] = {"ce": float(ce.detach())}
    if bool(labelled.any()):
        hit = logits_pos.detach()[labelled].argmax(1) == y[labelled]
        metrics["accuracy"] = float(hit.float().mean())
    loss = ce
    if logits_neg is not None and generative_weight > 0:
        out = contrastive_loss(-torch.logsumexp(logits_pos, 1), -torch.logsumexp(logits_neg, 1),
                               energy_reg=energy_reg)
        loss = ce + generative_weight * out.loss
        metrics.update({k: v for k, v in out.metrics.items() if k != "loss"})
    metrics["loss"] = float(loss.detach())
    return LossOutput(loss, metrics)


class JEM(DensityEvalMixin, Model):
    """``JEM(my_classifier)``: any ``nn.Module`` mapping ``(B, *shape)`` to logits ``(B, K)``.

    Keyword options are :class:`JEMOptions` fields. Train with
    ``shortrun.fit(jem, x, labels=y, unlabelled=x_u, epochs=...)``; then :meth:`predict`,
    :meth:`predict_proba`, :meth:`energy`, :meth:`ood_score` and ``sample(n, y=...)``.
    """

    Config = JEMOptions
    supervised = True
    networks = ("classifier",)

    def __init__(self, classifier: nn.Module, options: JEMOptions | None = None,
                 info: DataInfo | None = None, **option_values: Any) -> None:
        super().__init__(merge_options(type(self).Config, options, option_values), info)
        self._given(classifier=classifier)
        self.classifier = classifier
        self._finish_init()

    @classmethod
    def from_config(cls, options: JEMOptions, info: DataInfo) -> JEM:
        model = cls(build_logits(options, info), options, info)
        model.user_networks = ()
        return model

    def setup(self, info: DataInfo) -> None:
        m: JEMOptions = self.options
        bounded = info.kind in ("image", "binary")
        low, high = (info.low, info.high) if bounded else (-m.init_scale, m.init_scale)
        self.noise = NoiseSource(info.shape, m.init_noise, low, high, std=m.init_scale)
        self.domain = (info.low, info.high) if (bounded and m.clamp_to_data) else None
        self.source = (ReplayBuffer(m.buffer_size, self.noise, m.reinit) if m.chain == "buffer"
                       else self.noise)

    def on_train_start(self, data: LoadedData) -> None:
        labels = data.train_labels
        if labels is None:
            raise ConfigError("model jem needs labels: give shortrun.fit(model, x, labels=y) or "
                              "a labelled dataset (mnist, fashion, an .npz with y_train)")
        known = labels[labels != UNLABELLED]
        if len(known) and (int(known.min()) < 0 or int(known.max()) >= self.options.n_classes):
            raise ConfigError(f"model jem: labels span {int(known.min())}..{int(known.max())}; "
                              f"they must lie in 0..{self.options.n_classes - 1} "
                              f"(model.n_classes={self.options.n_classes}) or be "
                              f"{UNLABELLED} (unlabelled)")

    # --- the energies -----------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits ``f(x)``."""
        return self.classifier(x)

    def unconditional_energy(self) -> LogitEnergy:
        return LogitEnergy(self.classifier)

    def class_energy(self, y: torch.Tensor, guidance: float = 0.0) -> JointLogitEnergy:
        return JointLogitEnergy(self.classifier, y, guidance)

    def run_chain(self, energy: nn.Module, x0: torch.Tensor, steps: int | None = None,
                  generator: torch.Generator | None = None) -> torch.Tensor:
        m: JEMOptions = self.options
        x, _ = langevin(energy, x0, steps or m.langevin_steps, m.step_size, m.noise_scale,
                        drift_clamp=m.drift_clamp, domain=self.domain, generator=generator)
        return x

    def training_step(self, batch, step, optimizers):
        m: JEMOptions = self.options
        x, y = batch
        logits_neg = None
        if m.generative_weight > 0:
            was_training = self.classifier.training
            self.classifier.eval()  # chains see the deterministic network (no dropout)
            x0 = self.source.start(x.shape[0], data=x).to(x)
            self.last_negatives = self.run_chain(self.unconditional_energy(), x0)
            self.source.finish(self.last_negatives)
            self.classifier.train(was_training)
            logits = self.classifier(torch.cat([x, self.last_negatives]))
            logits_pos, logits_neg = logits[: len(x)], logits[len(x):]
        else:
            logits_pos = self.classifier(x)
        out = jem_loss(logits_pos, y, logits_neg, m.generative_weight, m.energy_reg)
        norm = self.optimizer_step(optimizers["main"], out.loss)
        metrics = dict(out.metrics)
        if norm is not None:
            metrics["grad_norm"] = norm
        return metrics

    # --- use --------------------------------------------------------------------------------
    def _checked(self, x: Any, what: str) -> torch.Tensor:
        return check_batch(x, self.require_info(what), f"JEM.{what}", device=self.device)

    @torch.no_grad()
    def predict_proba(self, x: Any) -> torch.Tensor:
        """``p(y|x)`` ``(B, K)``: the softmax of the logits (= exp(E(x) − E(x, y)))."""
        return F.softmax(self(self._checked(x, "predict_proba")), dim=1)

    @torch.no_grad()
    def predict(self, x: Any) -> torch.Tensor:
        """The most probable class ``(B,)``."""
        return self(self._checked(x, "predict")).argmax(1)

    @torch.no_grad()
    def energy(self, x: Any, y: Any = None) -> torch.Tensor:
        """``E(x) = −logsumexp f(x)`` (``y`` None) or ``E(x, y) = −f(x)[y]``, shape ``(B,)``."""
        x = self._checked(x, "energy")
        labels = None if y is None else self._labels(y, len(x))
        return LogitEnergy(self.classifier, labels)(x)

    @torch.no_grad()
    def ood_score(self, x: Any) -> torch.Tensor:
        """Out-of-distribution score ``E(x) = −log p(x) − log Z``: higher is more unusual."""
        return self.energy(x)

    def _labels(self, y: Any, n: int) -> torch.Tensor:
        k = self.options.n_classes
        labels = torch.as_tensor(y, dtype=torch.long).reshape(-1)
        if labels.numel() == 1:
            labels = labels.expand(n)
        if labels.numel() != n:
            raise ConfigError(f"y: {labels.numel()} labels for {n} samples; give one class or "
                              "one label per sample")
        if int(labels.min()) < 0 or int(labels.max()) >= k:
            raise ConfigError(f"y: classes must lie in 0..{k - 1}; got {int(labels.min())}.."
                              f"{int(labels.max())}")
        return labels.to(self.device)

    def _start(self, n: int, generator: torch.Generator | None) -> torch.Tensor:
        src = self.source
        if (self.options.sample_from == "chains" and isinstance(src, ReplayBuffer)
                and bool(src.filled)):
            idx = torch.randint(src.store.shape[0], (n,), generator=generator)
            return src.store[idx.to(src.store.device)].clone()
        return self.noise.start(n, generator=generator).to(self.device)

    @torch.no_grad()
    def sample(self, n, steps=None, generator=None, y: Any = None,
               guidance: float | None = None):
        """``n`` samples of ``p(x)``, or of ``p(x|y)`` with ``y`` (one class or one per sample):
        Langevin on ``E(x)`` or on ``E_w(x, y)`` (``guidance`` w, default ``model.guidance``)."""
        check_sample_args(n, steps, generator)
        self.require_info("sample")
        steps = steps or self.sample_steps or self.options.langevin_steps
        if y is None:
            energy: nn.Module = self.unconditional_energy()
        else:
            w = self.options.guidance if guidance is None else float(guidance)
            if w < 0:
                raise ConfigError(f"guidance: must be >= 0 (0 is exact p(x|y)); got {w}")
            energy = self.class_energy(self._labels(y, n), w)
        return self.run_chain(energy, self._start(n, generator), steps, generator)

    def draw(self, path: Path, n: int) -> None:
        info = self.require_info("draw")
        labels = torch.arange(n) % self.options.n_classes
        if info.shape == (2,):
            self.draw_2d(self.unconditional_energy(), self.sample(n, y=labels), path)
        else:
            from shortrun.plotting import save_samples

            order = labels.argsort(stable=True)
            save_samples(self.sample(n, y=labels)[order.to(self.device)], info, path)

    def density_energy(self):
        return self.unconditional_energy()
