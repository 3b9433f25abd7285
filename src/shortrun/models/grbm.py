"""Gaussian-Bernoulli RBM (model ``grbm``): real-valued visible units, σ fixed or learned.

Energy (Cho, Ilin & Raiko 2011, Eq. 2, with zᵢ = log σᵢ²):
``E(v, h) = Σᵢ (vᵢ − bᵢ)²/(2σᵢ²) − cᵀh − (v/σ²)ᵀWh``, so ``p(v|h) = N(b + Wh, σ²)`` and
``p(h=1|v) = σ(c + Wᵀ(v/σ²))``; free energy ``F(v) = Σᵢ (vᵢ − bᵢ)²/(2σᵢ²) − Σⱼ
softplus(c + Wᵀ(v/σ²))ⱼ``. The closed-form gradient of ``mean F(data) − mean F(chains)``:
``∂F/∂W = −(v/σ²) p(h|v)ᵀ``, ``∂F/∂b = −(v − b)/σ²``, ``∂F/∂c = −p(h|v)``,
``∂F/∂zᵢ = −(vᵢ − bᵢ)²/(2σᵢ²) + vᵢ (W p(h|v))ᵢ / σᵢ²`` (Cho et al. 2011, Eq. 5-7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from shortrun.energies.rbm import GaussianRBMParams
from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.rbm_learning import RBMBase, RBMOptions
from shortrun.samplers.gibbs import GibbsState


@dataclass
class GaussianBernoulliRBMOptions(RBMOptions):
    learn_sigma: bool = fld(True, doc="learn the visible variances (else fixed at sigma_init)")
    sigma_init: str = fld("data", choices=("data", "one"),
                          doc="data: per-unit std of the training data; one: σ = 1")
    min_sigma: float = fld(0.05, gt=0.0, doc="lower bound on σ (constant pixels would collapse)")
    beta_min: float = fld(0.1, gt=0.0, lt=1.0, doc="lowest inverse temperature (must be > 0)")


GaussianRBMOptions = GaussianBernoulliRBMOptions  # the earlier name, kept as an alias


class GaussianBernoulliRBM(RBMBase):
    Config = GaussianBernoulliRBMOptions

    def setup(self, info) -> None:
        if info.kind == "binary":
            raise ConfigError("model grbm models real-valued data; this dataset is binary: "
                              "use model rbm, or unset data.binarize")
        super().setup(info)
        z = torch.zeros(self.n_visible)
        if self.options.learn_sigma:
            self.log_var = nn.Parameter(z)
        else:
            self.register_buffer("log_var", z)

    def params(self, fast: bool = False) -> GaussianRBMParams:
        W, b, c = self.W.detach(), self.b.detach(), self.c.detach()
        if fast:
            W, b, c = W + self.W_fast, b + self.b_fast, c + self.c_fast
        return GaussianRBMParams(W, b, c, self.log_var.detach())

    def on_train_start(self, data) -> None:
        v = data.train.reshape(len(data.train), -1).to(self.W)
        self.b.data.copy_(v.mean(0))
        if self.options.sigma_init == "data":
            floor = 2 * math.log(self.options.min_sigma)
            self.log_var.data.copy_(torch.log(v.var(0)).clamp_min(floor))
        super().on_train_start(data)

    def visible_stats(self, v):
        prec = torch.exp(-self.log_var.detach())
        return v * prec, (v - self.b.detach()) * prec

    def extra_grads(self, pos: GibbsState, neg: GibbsState) -> None:
        if not isinstance(self.log_var, nn.Parameter):
            return
        self.log_var.grad = self._dF_dz(pos).mean(0) - self._dF_dz(neg).mean(0)

    def _dF_dz(self, s: GibbsState) -> torch.Tensor:
        prec = torch.exp(-self.log_var.detach())
        quad = 0.5 * (s.v - self.b.detach()) ** 2 * prec
        return -quad + s.v * (s.h_prob @ self.W.detach().t()) * prec

    def after_step(self) -> None:
        if isinstance(self.log_var, nn.Parameter):
            with torch.no_grad():
                self.log_var.clamp_(min=2 * math.log(self.options.min_sigma))

    def free_energy_from(self, state: GibbsState) -> torch.Tensor:
        prec = torch.exp(-self.log_var.detach())
        quad = (0.5 * (state.v - self.b.detach()) ** 2 * prec).sum(-1)
        return quad - F.softplus(state.h_input).sum(-1)

    def enumerable_bits(self) -> int:
        return self.n_hidden

    def log_z(self, data=None, generator=None):
        if self.n_hidden > self.options.exact_max_bits:
            raise ConfigError(f"loglik for grbm enumerates the hidden layer: model.n_hidden="
                              f"{self.n_hidden} is over model.exact_max_bits="
                              f"{self.options.exact_max_bits} (AIS is implemented for the "
                              "binary rbm only)")
        return super().log_z(data, generator)

    def start_state(self, n, generator):
        p = self.params()
        noise = torch.randn((n, self.n_visible), generator=generator)
        return p.b + torch.exp(0.5 * p.log_var) * noise

    @torch.no_grad()
    def mean_sample(self, n: int) -> torch.Tensor:
        p = self.params()
        v = self.sample(n).reshape(n, -1)
        return p.visible_mean(p.hidden_prob(v)).reshape(n, *self.info.shape)
