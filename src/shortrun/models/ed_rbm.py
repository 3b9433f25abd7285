"""A Bernoulli RBM trained by energy discrepancy instead of CD/PCD (model ``ed_rbm``).

The energy is the RBM's free energy ``F(v) = −bᵀv − Σⱼ softplus(c + Wᵀv)ⱼ`` (Hinton 2002) and
the loss is :func:`~shortrun.objectives.energy_discrepancy.energy_discrepancy` with Bernoulli
bit flips (Schröder et al. 2023, the discrete perturbation): no Gibbs chain in training. Its
gradient goes through autograd and an Adam optimiser at ``train.lr``. Everything that uses
the trained RBM — Gibbs sampling, exact or AIS ``log Z``, ``loglik`` in ``shortrun eval`` — is
:class:`~shortrun.models.rbm.BernoulliRBM`'s, so its test log-likelihood is comparable with
CD's and PCD's number for number.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.base import Model, OptimOptions
from shortrun.models.rbm import BernoulliRBM, BernoulliRBMOptions
from shortrun.objectives.energy_discrepancy import energy_discrepancy


@dataclass
class EDRBMOptions(BernoulliRBMOptions):
    flip_prob: float = fld(0.1, gt=0, lt=1, doc="ed: bit-flip probability per perturbation step")
    ed_m: int = fld(16, gt=0, doc="ed: M, negatives per data point")
    ed_w: float = fld(1.0, ge=0, doc="ed: the stabiliser w (0: the plain estimator)")

    def check(self, cfg) -> None:
        super().check(cfg)
        if self.centering:
            raise ConfigError("model.centering: the centered gradient is a CD/PCD device; "
                              "ed_rbm trains the plain free energy, set model.centering=false")
        if self.learning == "fpcd":
            raise ConfigError("model.learning=fpcd has fast weights for chains; ed_rbm runs no "
                              "chain: leave model.learning at pcd (unused)")


class EDRBM(BernoulliRBM):
    """``EDRBM(n_hidden=20, flip_prob=0.1, ed_m=16)``: a :class:`BernoulliRBM` whose update is
    energy discrepancy on its free energy."""

    Config = EDRBMOptions

    def setup(self, info) -> None:
        if self.options.centering or self.options.learning == "fpcd":
            raise ConfigError("ed_rbm trains the plain free energy without chains: set "
                              "centering=False and leave learning at pcd (unused)")
        super().setup(info)

    def free_energy_graph(self, v: torch.Tensor) -> torch.Tensor:
        """``F(v)`` with autograd through ``(W, b, c)`` (the standard parametrisation)."""
        return -(v @ self.b) - F.softplus(self.c + v @ self.W).sum(-1)

    def build_optimizers(self, optim: OptimOptions | None = None,
                         ) -> dict[str, torch.optim.Optimizer]:
        return Model.build_optimizers(self, optim)

    def training_step(self, batch, step, optimizers):
        m: EDRBMOptions = self.options
        v = batch.reshape(len(batch), -1).to(self.W)
        out = energy_discrepancy(self.free_energy_graph, v, m=m.ed_m, w=m.ed_w,
                                 perturbation="bernoulli", flip_prob=m.flip_prob)
        self.optimizer_step(optimizers["main"], out.loss)
        return dict(out.metrics)
