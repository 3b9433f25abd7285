"""Bernoulli-Bernoulli restricted Boltzmann machine (model ``rbm``), optionally centered.

Energy in shortrun's sign: ``E(v, h) = −vᵀWh − bᵀv − cᵀh``, free energy
``F(v) = −bᵀv − Σⱼ softplus(c + Wᵀv)ⱼ`` (Hinton 2002; Salakhutdinov & Murray 2008, Eq. 11).

Centering (Montavon & Müller 2012; Melchior, Fischer & Wiskott 2016, Eq. 9 and Algorithm 1)
trains the same distribution in the parametrisation
``E(v, h) = −(v − μ)ᵀW(h − λ) − bᵀ(v − μ) − cᵀ(h − λ)``: the gradient becomes
``⟨(v − μ)(h − λ)ᵀ⟩_data − ⟨(v − μ)(h − λ)ᵀ⟩_model``, better conditioned. The offsets start
at the data means (μ) and the mean hidden probability on the data (λ) and follow running means
of the data statistics at rate ``offset_rate`` (0.01 in the paper); each offset move is paired
with the bias change that leaves the distribution unchanged (Algorithm 1, lines 8-9). The
kernel, log Z and likelihoods use the equivalent standard form
``W, b − Wλ, c − Wᵀμ`` (whose log Z differs from the centered one by a constant only).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from shortrun.collectives import all_mean_
from shortrun.energies.rbm import BernoulliRBMParams, bernoulli
from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.rbm_learning import RBMBase, RBMOptions
from shortrun.samplers.gibbs import GibbsState
from shortrun.speed.rbm_step import StepOptions


@dataclass
class BernoulliRBMOptions(RBMOptions):
    centering: bool = fld(False, doc="centered gradient (Melchior et al. 2016)")
    offset_rate: float = fld(0.01, gt=0.0, le=1.0, doc="running-mean rate of the offsets")


class BernoulliRBM(RBMBase):
    Config = BernoulliRBMOptions
    fast_update = True  # the rbm_step family computes this class's (not a subclass's) update

    def setup(self, info) -> None:
        # (N, D) vectors in [0, 1] are visible probabilities, as scikit-learn's BernoulliRBM
        # takes them; on_train_start checks their range
        if info.kind not in ("binary", "vector"):
            raise ConfigError(f"model rbm needs {{0,1}} data (data kind 'binary') or (N, D) "
                              f"vectors of probabilities in [0, 1]; this dataset is "
                              f"{info.kind!r}: set data.binarize (digits: true, mnist: 0.5), "
                              "flatten images in [0, 1] to (N, D) vectors, or use model grbm "
                              "for real values")
        super().setup(info)
        self.register_buffer("mu", torch.zeros(self.n_visible))
        self.register_buffer("lam", torch.zeros(self.n_hidden))

    @property
    def centered(self) -> bool:
        return bool(self.options.centering)

    def fast_step_options(self) -> StepOptions | None:
        m = self.options
        if not (vars(type(self)).get("fast_update") and m.learning in ("cd", "pcd")
                and m.chain == "gibbs"):
            return None
        return StepOptions(m.learning, m.k, self.centered, m.offset_rate)

    def params(self, fast: bool = False) -> BernoulliRBMParams:
        W, b, c = self.W.detach(), self.b.detach(), self.c.detach()
        if self.centered:
            b = b - W @ self.lam
            c = c - self.mu @ W
        if fast:
            W, b, c = W + self.W_fast, b + self.b_fast, c + self.c_fast
        return BernoulliRBMParams(W, b, c)

    def on_train_start(self, data) -> None:
        v = data.train.reshape(len(data.train), -1).to(self.W)
        lo, hi = float(v.min()), float(v.max())
        if lo < 0 or hi > 1:
            raise ConfigError(f"model rbm needs {{0,1}} data or probabilities in [0, 1]; these "
                              f"values span [{lo:g}, {hi:g}]: scale them to [0, 1] (e.g. "
                              "sklearn.preprocessing.minmax_scale), set data.binarize, or use "
                              "model grbm for real values")
        if self.options.visible_bias_init == "data":
            p = v.mean(0).clamp(1e-3, 1 - 1e-3)
            self.b.data.copy_(torch.log(p) - torch.log1p(-p))
        if self.centered:
            self.mu.copy_(v.mean(0))
            self.lam.copy_(torch.sigmoid(self.c + (v - self.mu) @ self.W).mean(0).detach())
        super().on_train_start(data)

    def visible_stats(self, v):
        x = v - self.mu if self.centered else v
        return x, x

    def hidden_stats(self, h_prob):
        return h_prob - self.lam if self.centered else h_prob

    @torch.no_grad()
    def before_gradients(self, pos: GibbsState) -> None:
        if not self.centered:
            return
        rate = self.options.offset_rate
        # data-parallel runs: the means of the global batch, so that the offsets (and the bias
        # shifts paired with them, written outside the optimiser) agree on every rank
        means = all_mean_(torch.cat([pos.v.mean(0), pos.h_prob.mean(0)]))
        new_mu = torch.lerp(self.mu, means[: self.n_visible], rate)
        new_lam = torch.lerp(self.lam, means[self.n_visible :], rate)
        self.b.add_(self.W @ (new_lam - self.lam))
        self.c.add_((new_mu - self.mu) @ self.W)
        self.mu.copy_(new_mu)
        self.lam.copy_(new_lam)

    def free_energy_from(self, state: GibbsState) -> torch.Tensor:
        p = self.step_params()
        return -(state.v @ p.b) - F.softplus(state.h_input).sum(-1)

    def centered_free_energy(self, v: torch.Tensor) -> torch.Tensor:
        """``F`` in the centered parametrisation with autograd through (W, b, c); the closed-form
        update is checked against its gradient."""
        x = v - self.mu
        a = self.c + x @ self.W
        return -(x @ self.b) - (F.softplus(a) - self.lam * a).sum(-1)

    def start_state(self, n, generator):
        return bernoulli(torch.sigmoid(self.params().b).expand(n, -1).contiguous(), generator)

    @torch.no_grad()
    def mean_sample(self, n: int) -> torch.Tensor:
        p = self.params()
        v = self.sample(n).reshape(n, -1)
        return p.visible_prob(bernoulli(p.hidden_prob(v))).reshape(n, *self.info.shape)
