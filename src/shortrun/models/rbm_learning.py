"""What the two RBMs share: options, chains, the closed-form CD/PCD/FPCD update, evaluation.

The update is the maximum-likelihood gradient of the design notes, with the free energy as the
energy: ``∇θ L = ⟨∂F/∂θ⟩_data − ⟨∂F/∂θ⟩_chains`` where ``L = mean F(v_data) − mean F(v_k)``.
For an RBM both terms are closed form (Hinton 2002, Eq. 5): for the weights the positive
term is ``⟨v hᵀ⟩`` at the data (hidden probabilities) and the negative term is the same
statistic at the chains' end. It is computed under ``torch.no_grad()``, written into
``p.grad`` and applied by a torch SGD optimiser (momentum, weight decay on ``W`` only), so the
Trainer's learning-rate schedule and checkpoints work unchanged.

Chains come from a chain source (``self.source``, :mod:`shortrun.samplers.sources`): CD-k
starts at the data (``DataSource``, Hinton 2002); PCD-k keeps ``n_chains`` persistent chains
that all advance every update (``PersistentChains(rotating=False)``, Tieleman 2008), moved by
block Gibbs, or as many parallel-tempering ladders (``TemperedChains``, Desjardins et al.
2010); fast PCD adds fast weights to the chains' parameters,
``θ_f ← decay·θ_f − fast_lr·∇θ L`` (Tieleman & Hinton 2009). All chain state lives in
buffers, so it is checkpointed; checkpoints written before the chains moved into the source
(keys ``chains``, ``tempering.*``) still load.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from shortrun.data.base import DataInfo
from shortrun.energies.rbm import RBMParams
from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.base import Model, ModelOptions, OptimOptions, merge_options
from shortrun.models.inputs import check_batch, check_sample_args
from shortrun.models.rbm_sgd import RBMSGD
from shortrun.samplers.gibbs import GibbsState, block_gibbs, hidden_state
from shortrun.samplers.sources import DataSource, PersistentChains, TemperedChains
from shortrun.samplers.tempering import beta_ladder, tempering_step
from shortrun.speed import rbm_step


@dataclass
class RBMOptions(ModelOptions):
    n_hidden: int = fld(64, gt=0)
    learning: str = fld("pcd", choices=("cd", "pcd", "fpcd"),
                        doc="CD-k (chains from the data), PCD-k, or fast PCD")
    k: int = fld(1, gt=0, doc="Gibbs sweeps per update")
    n_chains: int = fld(100, gt=0, doc="persistent chains (pcd, fpcd), ALL advanced every "
                        "update (unlike the ebm's rotating pool, model.pool_size)")
    chain: str = fld("gibbs", choices=("gibbs", "tempering"),
                     doc="kernel of the persistent chains")
    n_temps: int = fld(10, ge=2, doc="parallel-tempering replicas (chain: tempering)")
    beta_min: float = fld(0.0, ge=0.0, lt=1.0, doc="lowest inverse temperature of the ladder")
    momentum: float = fld(0.0, ge=0.0, lt=1.0)
    init_std: float = fld(0.01, gt=0.0, doc="std of the initial weights")
    visible_bias_init: str = fld("data", choices=("data", "zero"),
                                 doc="data: logit of the pixel means (Hinton's guide §8)")
    fast_lr: float | None = fld(None, gt=0.0,
                                doc="fast-weight learning rate (undecayed); default train.lr")
    fast_decay: float = fld(0.95, ge=0.0, lt=1.0, doc="fast weights' decay per update")
    sample_steps: int = fld(1000, gt=0, doc="Gibbs sweeps of `shortrun sample`")
    exact_max_bits: int = fld(24, ge=1, le=30,
                              doc="log Z exact when min(layer sizes) <= this, else AIS")
    ais_runs: int = fld(100, ge=2)
    ais_betas: int = fld(14500, ge=10)

    def check(self, cfg) -> None:
        if self.chain == "tempering" and self.learning == "cd":
            raise ConfigError("model.chain: tempering runs persistent chains; set "
                              "model.learning=pcd or fpcd (CD restarts at the data)")


def chain_source(m: RBMOptions, n_visible: int) -> DataSource | PersistentChains | TemperedChains:
    """Where the negative chains come from: the data (CD), ``n_chains`` persistent chains
    that all advance every update (PCD, FPCD), or as many tempered ladders."""
    if m.learning == "cd":
        return DataSource()
    if m.chain == "tempering":
        return TemperedChains(m.n_chains, n_visible, beta_ladder(m.n_temps, m.beta_min))
    return PersistentChains(m.n_chains, torch.zeros(m.n_chains, n_visible), rotating=False)


# state-dict keys of the chains before they moved into ``self.source``
_OLD_CHAIN_KEYS = {"chains": "source.chains",
                   **{f"tempering.{k}": f"source.{k}"
                      for k in ("betas", "states", "parity", "accepted", "proposed")}}


def _migrate_chain_keys(module: nn.Module, state_dict: dict, prefix: str, *args) -> None:
    """Load-time migration: a checkpoint written before the chains moved into the chain
    source keeps them under ``chains`` / ``tempering.*``; rename those keys in place."""
    for old, new in _OLD_CHAIN_KEYS.items():
        if prefix + old in state_dict:
            state_dict[prefix + new] = state_dict.pop(prefix + old)


class RBMBase(Model):
    """Shared training for :class:`BernoulliRBM` and :class:`GaussianBernoulliRBM`.

    Subclasses define ``params(fast)`` (standard-form conditionals for the kernel),
    ``visible_stats(v)`` (the visible factor multiplying ``W`` and ``−∂F/∂b``), ``init_chains``
    and may add gradients in ``extra_grads``.
    """

    Config = RBMOptions

    def __init__(self, n_hidden: int | None = None, options: RBMOptions | None = None,
                 info: DataInfo | None = None, **option_values: Any) -> None:
        """``BernoulliRBM(n_hidden=20)``: sizes and keyword options (``RBMOptions`` fields,
        checked like recipe keys); the visible size comes from the data (``info``, or
        ``shortrun.fit``)."""
        if n_hidden is not None:
            option_values["n_hidden"] = n_hidden
        super().__init__(merge_options(type(self).Config, options, option_values), info)
        self.fast_lr: float | None = self.options.fast_lr
        # old checkpoints name the chains ``chains`` / ``tempering.*``: renamed on load
        self.register_load_state_dict_pre_hook(_migrate_chain_keys)
        self._step_params: RBMParams | None = None  # set inside training_step only
        self._finish_init()

    def setup(self, info: DataInfo) -> None:
        m = self.options
        nv, nh = info.dim, m.n_hidden
        self.n_visible, self.n_hidden = nv, nh
        self.W = nn.Parameter(torch.randn(nv, nh) * m.init_std)
        self.b = nn.Parameter(torch.zeros(nv))
        self.c = nn.Parameter(torch.zeros(nh))
        if m.learning == "fpcd":
            for name, shape in (("W_fast", (nv, nh)), ("b_fast", (nv,)), ("c_fast", (nh,))):
                self.register_buffer(name, torch.zeros(shape))
        self.source = chain_source(m, nv)

    # ---------------------------------------------------------------- subclass hooks
    def params(self, fast: bool = False) -> RBMParams:
        raise NotImplementedError

    def visible_stats(self, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def hidden_stats(self, h_prob: torch.Tensor) -> torch.Tensor:
        return h_prob

    def extra_grads(self, pos: GibbsState, neg: GibbsState) -> None:
        """Gradients of parameters beyond (W, b, c), written into ``.grad``."""

    def init_chains(self, data: torch.Tensor) -> torch.Tensor:
        idx = torch.randint(len(data), (self.options.n_chains,))
        return data[idx].reshape(len(idx), -1).to(self.W)

    # ---------------------------------------------------------------- training
    def on_train_start(self, data) -> None:
        if self.options.learning == "cd":
            return
        self.source.reset(self.init_chains(data.train))

    def build_optimizers(self, optim: OptimOptions | None = None,
                         ) -> dict[str, torch.optim.Optimizer]:
        """Plain SGD (with ``momentum``) at ``train.lr``; weight decay on ``W`` only. FPCD's
        fast weights learn at ``model.fast_lr``, default ``train.lr``. ``foreach``: the same
        arithmetic in fewer calls, which matters for small RBMs whose whole step is short;
        :class:`~shortrun.models.rbm_sgd.RBMSGD` is torch's SGD update without ``torch.optim``
        (whose constructor imports a large part of torch at its first use)."""
        t, m = optim or OptimOptions(), self.options
        self.fast_lr = m.fast_lr or t.lr
        others = [p for n, p in self.named_parameters() if n != "W"]
        groups = [{"params": [self.W], "weight_decay": t.weight_decay},
                  {"params": others, "weight_decay": 0.0}]
        return {"main": RBMSGD(groups, lr=t.lr, momentum=m.momentum, foreach=True)}

    @torch.no_grad()
    def negative_phase(self, pos: GibbsState) -> GibbsState:
        """The chains' end state, with hidden statistics under the regular parameters."""
        m = self.options
        if isinstance(self.source, DataSource):  # CD-k: from the positive phase's state
            return block_gibbs(self.step_params(),
                               self.source.start(len(pos.v), data=pos), m.k)
        fast = m.learning == "fpcd"
        chain_energy = self.params(fast=True) if fast else self.step_params()
        if isinstance(self.source, TemperedChains):
            state = self.source.start()
            for _ in range(m.k):
                state, info = tempering_step(chain_energy, state, betas=self.source.betas)
                self.source.record(info)
            self.source.finish(state)
            return hidden_state(self.step_params(), self.source.states[0].clone())
        state = block_gibbs(chain_energy, self.source.start(), m.k)
        self.source.finish(state.v)
        return hidden_state(self.step_params(), state.v) if fast else state

    @torch.no_grad()
    def before_gradients(self, pos: GibbsState) -> None:
        """Hook between the chains and the gradient (centering updates its offsets here)."""

    def after_step(self) -> None:
        """Hook after the optimiser step (the Gaussian RBM keeps its variances bounded)."""

    @torch.no_grad()
    def write_gradients(self, pos: GibbsState, neg: GibbsState) -> None:
        """``p.grad = ∂/∂θ [mean F(v_data) − mean F(v_k)]`` in closed form."""
        xd, bd = self.visible_stats(pos.v)
        xm, bm = self.visible_stats(neg.v)
        hd, hm = self.hidden_stats(pos.h_prob), self.hidden_stats(neg.h_prob)
        nd, nm = len(xd), len(xm)
        # −⟨x hᵀ⟩_data + ⟨x hᵀ⟩_chains as ONE GEMM over the stacked batch (K = nd + nm keeps
        # BLAS in its efficient regime)
        x = torch.cat([xd, xm])
        h = torch.cat([hd * (-1.0 / nd), hm * (1.0 / nm)])
        self.W.grad = (x.t() @ h).to(self.W.dtype)  # float32 under bf16 autocast too
        self.b.grad = bm.mean(0) - bd.mean(0)
        self.c.grad = hm.mean(0) - hd.mean(0)
        self.extra_grads(pos, neg)

    def step_params(self) -> RBMParams:
        """``params()``, computed once per training step: the positive phase, the chains'
        hidden statistics and both free energies all read the parameters before the update
        (nothing moves them until :meth:`before_gradients`), so one set serves them all."""
        p = self._step_params
        return p if p is not None else self.params()

    def fast_step_options(self) -> rbm_step.StepOptions | None:
        """The options of the update when a faster route may compute it (the binary RBM's
        CD/PCD with Gibbs chains), else None: the torch step always runs."""
        return None

    def training_step(self, batch, step, optimizers):
        """One CD/PCD/FPCD update: by a faster route when the ``rbm_step`` family settles on
        one (:func:`shortrun.speed.rbm_step.fast_step`), else by torch calls."""
        opts = self.fast_step_options()
        if opts is not None:
            chains = self.source.chains if opts.learning == "pcd" else None
            mu, lam = (self.mu, self.lam) if opts.centered else (None, None)
            tensors = (self.W, self.b, self.c, mu, lam, chains)
            out = rbm_step.fast_step(tensors, batch, opts, optimizers["main"])
            if out is not None:
                return out
        return self._torch_step(batch, optimizers)

    def _torch_step(self, batch, optimizers):
        m = self.options
        with torch.no_grad():
            v = batch.reshape(len(batch), -1)
            self._step_params = self.params()
            try:
                pos = hidden_state(self._step_params, v)
                neg = self.negative_phase(pos)
                f_pos = float(self.free_energy_from(pos).mean())
                f_neg = float(self.free_energy_from(neg).mean())
            finally:
                self._step_params = None
            self.before_gradients(pos)
            self.write_gradients(pos, neg)
            optimizers["main"].step()
            self.after_step()
            if m.learning == "fpcd":
                lr = self.fast_lr or OptimOptions().lr
                for fast, p in ((self.W_fast, self.W), (self.b_fast, self.b),
                                (self.c_fast, self.c)):
                    fast.mul_(m.fast_decay).add_(p.grad, alpha=-lr)
        out = {"loss": f_pos - f_neg, "energy_pos": f_pos, "energy_neg": f_neg}
        if isinstance(self.source, TemperedChains):
            out["swap_rate"] = self.source.last_swap_rate
        return out

    def free_energy_from(self, state: GibbsState) -> torch.Tensor:
        """Free energy at ``state.v`` reusing the hidden input the chain already computed."""
        raise NotImplementedError

    # ---------------------------------------------------------------- use
    @torch.no_grad()
    def sample(self, n, steps=None, generator=None):
        check_sample_args(n, steps, generator)
        self.require_info("sample")
        steps = steps or self.sample_steps or self.options.sample_steps
        p = self.params()
        v0 = self.start_state(n, generator)
        fast = rbm_step.fast_gibbs(self.W, p, v0, steps, generator)  # the step's route
        if fast is not None:
            return fast.reshape(n, *self.info.shape)
        state = block_gibbs(p, v0, steps, generator=generator)
        return state.v.reshape(n, *self.info.shape)

    def start_state(self, n: int, generator: torch.Generator | None) -> torch.Tensor:
        raise NotImplementedError

    def free_energy(self, v: torch.Tensor) -> torch.Tensor:
        """``F(v)`` of flattened or image-shaped ``v`` (standard parametrisation)."""
        v = check_batch(v, self.info, "free_energy", flat_ok=True)
        return self.params().free_energy(v.reshape(len(v), -1).to(self.W))

    def draw(self, path: Path, n: int) -> None:
        from shortrun.plotting import save_samples

        x = self.mean_sample(n)
        if len(self.info.shape) != 3:  # vectors: one row of pixels per sample
            x = x.reshape(n, 1, 1, -1)
        save_samples(x, self.info, path)

    def mean_sample(self, n: int) -> torch.Tensor:
        return self.sample(n)

    @torch.no_grad()
    def log_z(self, data: torch.Tensor | None = None,
              generator: torch.Generator | None = None) -> tuple[float, str, float]:
        """``(log Z, "exact" | "ais", standard error)``; exact when the smaller enumerable
        layer has at most ``model.exact_max_bits`` units, else AIS from the base-rate model
        fitted to ``data``."""
        data = None if data is None else check_batch(data, self.info, "log_z", flat_ok=True)
        from shortrun.estimators.ais import ais_log_partition, base_rate_bias
        from shortrun.estimators.exact import log_partition

        m, p = self.options, self.params()
        if self.enumerable_bits() <= m.exact_max_bits:
            return log_partition(p), "exact", 0.0
        if data is None:
            raise ConfigError("AIS needs the training data for its base-rate model")
        res = ais_log_partition(p, base_rate_bias(data), m.ais_runs, m.ais_betas, generator)
        return res.log_z, "ais", res.stderr

    def enumerable_bits(self) -> int:
        return min(self.n_visible, self.n_hidden)

    @torch.no_grad()
    def mean_log_likelihood(self, data: torch.Tensor, log_z: float,
                            batch: int = 10_000) -> float:
        """Average ``log p(v) = −F(v) − log Z`` in nats per example (float64)."""
        data = check_batch(data, self.info, "mean_log_likelihood", flat_ok=True)
        p = self.params()
        p64 = type(p)(*(t.double() for t in vars(p).values()))
        total = 0.0
        for i in range(0, len(data), batch):
            v = data[i:i + batch].reshape(-1, self.n_visible).double()
            total += float(p64.free_energy(v).sum())
        return -total / len(data) - log_z

    # ---------------------------------------------------------------- scikit-learn shape
    def _rows(self, x: torch.Tensor) -> torch.Tensor:
        """A batch already checked by ``check_batch`` (``(B, *shape)`` or ``(B, n_visible)``)
        as rows in the weights' dtype and device."""
        return x.reshape(len(x), -1).to(self.W)

    @torch.no_grad()
    def transform(self, v: Any) -> torch.Tensor:
        """Hidden probabilities ``p(h = 1 | v)``, ``(B, n_hidden)``: the learned features."""
        v = check_batch(v, self.require_info("transform"), "transform", flat_ok=True)
        return self.params().hidden_prob(self._rows(v))

    @torch.no_grad()
    def score_samples(self, v: Any, log_z: float | None = None,
                      generator: torch.Generator | None = None) -> torch.Tensor:
        """``log p(v) = −F(v) − log Z`` per example (nats, float64). ``log Z`` is exact when
        the smaller layer is enumerable (``model.exact_max_bits``), else AIS with ``v`` as
        the base-rate data; pass ``log_z`` to reuse one estimate."""
        v = check_batch(v, self.require_info("score_samples"), "score_samples", flat_ok=True)
        x = self._rows(v)
        if log_z is None:
            log_z = self.log_z(x, generator)[0]
        p = self.params()
        p64 = type(p)(*(t.double() for t in vars(p).values()))
        return -p64.free_energy(x.double()) - log_z

    def log_likelihood(self, v: Any, log_z: float | None = None,
                       generator: torch.Generator | None = None) -> float:
        """Mean ``log p(v)`` over the examples (nats); see :meth:`score_samples`."""
        v = check_batch(v, self.require_info("log_likelihood"), "log_likelihood", flat_ok=True)
        return float(self.score_samples(v, log_z, generator).mean())
