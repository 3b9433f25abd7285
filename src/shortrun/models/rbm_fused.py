"""The binary RBM's whole CD-k / PCD-k update in NumPy: the ``rbm_step`` route family.

Why a second implementation of one update: for a small RBM (``rbm_digits``: 64 × 20, batch
50, 100 chains) each product is a few thousand FLOPs, and the update's ~75 torch calls cost
2-5 µs of dispatch each, ~400 µs a step against ~90 µs for scikit-learn's NumPy BernoulliRBM
(issue 16; AMD EPYC, bench/README). NumPy's per-call cost is about a microsecond there. For a
large RBM (784 × 500) the products dominate and torch's measured GEMM routes
(:mod:`shortrun.products`) may win instead. So the step itself is a route, chosen per machine
like the products (:func:`step_route`): both candidates run a few updates of a scratch copy of
the model on the actual batch shape, and the faster is kept in the route cache.

The arithmetic is exactly that of :class:`shortrun.models.rbm_learning.RBMBase` with
:class:`shortrun.models.rbm.BernoulliRBM`'s centering (Melchior, Fischer & Wiskott 2016,
Algorithm 1) and torch's SGD (momentum, weight decay on ``W``): the same positive phase, the
same Gibbs sweeps (Hinton 2002, Eq. 5) drawing the *same* uniforms from torch's RNG in the same
order (:func:`shortrun.energies.rbm.uniform`), the same gradient and update. Only the summation
order of the products and the elementwise kernels differ, so before the route may be chosen it
must agree with the torch step in float64 to rounding over two updates (:func:`numpy_works`).

Scope: ``model.learning`` cd or pcd, ``model.chain`` gibbs, float32/float64 parameters on the
CPU, no bf16 autocast, one process, and the optimiser the RBM builds. Everything else (FPCD,
parallel tempering, the Gaussian RBM, data-parallel runs) takes the torch step. The parameter
update is the optimiser's own ``step()`` on the gradients written into ``p.grad``, as in the torch
step.

``SHORTRUN_ROUTE_RBM_STEP=torch|numpy`` pins the route (``SHORTRUN_ROUTE=numpy`` too);
``SHORTRUN_ROUTE`` naming another family's route puts the step on torch, its fixed route.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import numpy as np
import torch

from shortrun import routes
from shortrun.energies.rbm import uniform
from shortrun.products import match_blas_threads

if TYPE_CHECKING:
    from shortrun.models.rbm import BernoulliRBM

FAMILY = "rbm_step"
ROUTES = ("torch", "numpy")  # what a pin may name; "numpy@1" is NumPy with a one-thread BLAS
FIXED = "torch"
_WORKS: dict[tuple, bool] = {}


def applies(model: BernoulliRBM) -> bool:
    """Whether the NumPy step computes this model's update (module docstring, "Scope")."""
    from shortrun.models.rbm import BernoulliRBM

    m = model.options
    W = model.W
    if not (type(model) is BernoulliRBM and m.learning in ("cd", "pcd") and m.chain == "gibbs"):
        return False
    if W.device.type != "cpu" or W.dtype not in (torch.float32, torch.float64):
        return False
    if torch.is_autocast_enabled("cpu"):
        return False
    return not (torch.distributed.is_available() and torch.distributed.is_initialized())


def _sigmoid(a: np.ndarray) -> np.ndarray:
    """``σ(a) = (1 + tanh(a/2)) / 2``: overflow-free, and NumPy's vectorised tanh made it ~3×
    faster than scipy's expit in float32 on the AMD EPYC of bench/README (and no less accurate:
    both within 1e-7)."""
    out = a * 0.5
    np.tanh(out, out=out)
    out *= 0.5
    out += 0.5
    return out


def _softplus(a: np.ndarray) -> np.ndarray:
    """``log(1 + exp(a)) = max(a, 0) + log(1 + exp(−|a|))``, overflow-free; ``log`` rather than
    ``log1p`` (the argument is in [1, 2], so the absolute error stays at the dtype's rounding)
    because NumPy vectorises it: np.logaddexp took ~5× as long on that EPYC."""
    out = np.abs(a)
    np.negative(out, out=out)
    np.exp(out, out=out)
    out += 1.0
    np.log(out, out=out)
    out += np.maximum(a, 0.0)
    return out


def _mean0(x: np.ndarray) -> np.ndarray:
    """``x.mean(0)`` without ndarray.mean's Python wrapper (~5 µs a call on small arrays on the
    AMD EPYC)."""
    return np.add.reduce(x, axis=0) / x.shape[0]


class NumpyStep:
    """One update of ``model`` (a :class:`BernoulliRBM`) with ``optimizer`` (its SGD), on NumPy
    views of the parameters, buffers and momentum buffers: ``step(batch) -> metrics``."""

    def __init__(self, model: BernoulliRBM, optimizer: torch.optim.Optimizer,
                 blas_threads: int | None = None) -> None:
        self.model, self.optimizer, self.blas_threads = model, optimizer, blas_threads

    def __call__(self, batch: torch.Tensor) -> dict[str, float]:
        model, m = self.model, self.model.options
        match_blas_threads(self.blas_threads)
        W_t = model.W
        W, b, c = (p.detach().numpy() for p in (model.W, model.b, model.c))
        v = np.ascontiguousarray(batch.reshape(len(batch), -1).to(W_t).numpy())
        centered = model.centered
        mu, lam = model.mu.numpy(), model.lam.numpy()
        # the standard-form parameters of the step (BernoulliRBM.params)
        b_eff = b - W @ lam if centered else b
        c_eff = c - mu @ W if centered else c

        n_pos = len(v)
        pcd = m.learning == "pcd"
        # the positive phase and (PCD) the chains' hidden state in one product
        x_all = np.concatenate([v, model.source.chains.numpy()]) if pcd else v
        a_all = x_all @ W
        a_all += c_eff
        h_all = _sigmoid(a_all)
        a_pos, h_pos = a_all[:n_pos], h_all[:n_pos]
        x_neg, a_neg, h_neg = (x_all[n_pos:], a_all[n_pos:], h_all[n_pos:]) if pcd \
            else (v, a_pos, h_pos)
        n_neg = len(x_neg)
        for _ in range(m.k):  # block Gibbs, drawing torch's uniforms as gibbs_step does
            h = uniform((n_neg, model.n_hidden), W_t).numpy()
            np.less(h, h_neg, out=h, casting="unsafe")
            a_vis = h @ W.T
            a_vis += b_eff
            p_vis = _sigmoid(a_vis)
            x_neg = uniform((n_neg, model.n_visible), W_t).numpy()
            np.less(x_neg, p_vis, out=x_neg, casting="unsafe")
            a_neg = x_neg @ W
            a_neg += c_eff
            h_neg = _sigmoid(a_neg)
        if pcd:
            model.source.chains.numpy()[...] = x_neg
        # free energies F = −xᵀb − Σ softplus(a), data rows then chain rows
        x = np.concatenate([v, x_neg])
        f = x @ b_eff
        f += _softplus(np.concatenate([a_pos, a_neg])).sum(1)
        f_pos = -float(np.add.reduce(f[:n_pos])) / n_pos
        f_neg = -float(np.add.reduce(f[n_pos:])) / n_neg

        h = np.concatenate([h_pos, h_neg])
        if centered:  # BernoulliRBM.before_gradients: move the offsets, shift the biases
            rate = m.offset_rate
            new_mu = mu + rate * (_mean0(v) - mu)
            new_lam = lam + rate * (_mean0(h_pos) - lam)
            b += W @ (new_lam - lam)
            c += (new_mu - mu) @ W
            mu[...], lam[...] = new_mu, new_lam
            x -= mu
            h -= lam
        # write_gradients: ∂/∂θ [mean F(v_data) − mean F(v_k)], W's as one product
        x_pos, x_neg, h_pos, h_neg = x[:n_pos], x[n_pos:], h[:n_pos], h[n_pos:]
        g_b = _mean0(x_neg) - _mean0(x_pos)
        g_c = _mean0(h_neg) - _mean0(h_pos)
        h_pos *= -1.0 / n_pos
        h_neg *= 1.0 / n_neg
        grads = (x.T @ h, g_b, g_c)
        self._apply(grads)
        return {"loss": f_pos - f_neg, "energy_pos": f_pos, "energy_neg": f_neg}

    def _apply(self, grads: tuple[np.ndarray, ...]) -> None:
        """Write ``p.grad`` and step the optimiser, as :meth:`RBMBase.write_gradients` and the
        torch step do (the RBM's own :class:`RBMSGD` in its NumPy form)."""
        for p, g in zip((self.model.W, self.model.b, self.model.c), grads, strict=True):
            if p.grad is None:
                p.grad = torch.from_numpy(g)
            else:
                p.grad.numpy()[...] = g
        opt = self.optimizer
        opt.step_numpy() if isinstance(opt, RBMSGD) else opt.step()


def _unhooked(step):
    """``step`` without the hook-running wrapper torch puts on an optimiser class when it is
    first instantiated (marked ``hooked``): ``RBMSGD.step`` carries its own, and through two
    the step hooks (and the data-parallel gradient all-reduce) would run twice."""
    while getattr(step, "hooked", False) and hasattr(step, "__wrapped__"):
        step = step.__wrapped__
    return step


class RBMSGD(torch.optim.SGD):
    """torch's SGD, plus :meth:`step_numpy`: the same update (weight decay, momentum, the
    buffers in ``state[p]["momentum_buffer"]``) computed by NumPy on the tensors' memory. For
    a 64 × 20 RBM torch's foreach SGD cost ~90 µs a step in calls on the AMD EPYC of
    bench/README, more than the rest of the NumPy update; the NumPy form ~20. The state dict is
    SGD's, so checkpoints load either way."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._numpy_next = False

    def step_numpy(self) -> None:
        """One update in the NumPy form, through :meth:`step` so that hooks and the lr
        scheduler see a step (CPU float32/float64 parameters; anything else, or Nesterov,
        dampening, maximize, takes torch's form)."""
        self._numpy_next = True
        try:
            self.step()
        finally:
            self._numpy_next = False

    @torch.no_grad()
    def step(self, closure=None):
        if not (self._numpy_next and self._numpy_applies()):
            return _unhooked(torch.optim.SGD.step)(self, closure)
        for group in self.param_groups:
            lr, momentum, decay = group["lr"], group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g, pn = p.grad.numpy(), p.detach().numpy()
                if decay:
                    g = g + decay * pn
                if momentum:
                    state = self.state[p]
                    if state.get("momentum_buffer") is None:
                        state["momentum_buffer"] = torch.from_numpy(np.array(g, copy=True))
                    else:
                        buf = state["momentum_buffer"].numpy()
                        buf *= momentum
                        buf += g
                        g = buf
                pn -= g * lr
        return None

    def _numpy_applies(self) -> bool:
        return all(not (g["nesterov"] or g["dampening"] or g["maximize"])
                   and all(p.device.type == "cpu" and p.dtype in (torch.float32, torch.float64)
                           for p in g["params"])
                   for g in self.param_groups)


def numpy_works(model: BernoulliRBM) -> bool:
    """The float64 cross-check, once per option set: two updates of a float64 copy of
    ``model`` by the torch step and by :class:`NumpyStep`, from the same state and RNG state,
    agree to float64 rounding (parameters, offsets, chains, momentum, metrics)."""
    m = model.options
    key = (m.learning, m.k, bool(model.centered), m.momentum > 0)
    if key not in _WORKS:
        try:
            _WORKS[key] = _cross_check(model)
        except Exception:  # any failure means the route is not a candidate
            _WORKS[key] = False
    return _WORKS[key]


def _twin(model: BernoulliRBM, dtype: torch.dtype, lr: float = 0.05,
          weight_decay: float = 1e-3) -> tuple[BernoulliRBM, torch.optim.Optimizer]:
    from shortrun.models.base import OptimOptions

    twin = copy.deepcopy(model).to(dtype)
    twin._step_route_pin = "torch"
    opt = twin.build_optimizers(OptimOptions(lr=lr, weight_decay=weight_decay))["main"]
    return twin, opt


def _cross_check(model: BernoulliRBM) -> bool:
    g = torch.Generator().manual_seed(0)
    nv, n = model.n_visible, max(model.options.n_chains, 8)
    batch = (torch.rand(n, nv, generator=g, dtype=torch.float64) < 0.3).double()
    states = []
    with torch.random.fork_rng(devices=[]):
        for route in ROUTES:
            twin, opt = _twin(model, torch.float64)
            with torch.no_grad():
                twin.W.copy_(torch.randn(twin.W.shape, generator=g.manual_seed(1),
                                         dtype=torch.float64) * 0.3)
                twin.b.copy_(torch.randn(twin.b.shape, generator=g, dtype=torch.float64) * 0.3)
                twin.c.copy_(torch.randn(twin.c.shape, generator=g, dtype=torch.float64) * 0.3)
                twin.mu.copy_(batch.mean(0))
                twin.lam.fill_(0.4)
                if model.options.learning == "pcd":
                    twin.source.chains.copy_(
                        (torch.rand(twin.source.chains.shape, generator=g,
                                    dtype=torch.float64) < 0.5).double())
            torch.manual_seed(123)
            step = NumpyStep(twin, opt) if route == "numpy" else None
            metrics = []
            for i in range(2):
                half = batch[i * (n // 2):(i + 1) * (n // 2)]
                metrics.append(step(half) if step else twin.training_step(half, i,
                                                                          {"main": opt}))
            bufs = [opt.state[p].get("momentum_buffer") for p in (twin.W, twin.b, twin.c)]
            states.append(([t.clone() for t in twin.state_dict().values()],
                           [b for b in bufs if b is not None], metrics))
    (s_t, b_t, m_t), (s_n, b_n, m_n) = states
    if len(b_t) != len(b_n):
        return False
    close = all(torch.allclose(x, y, rtol=1e-9, atol=1e-9)
                for x, y in zip([*s_t, *b_t], [*s_n, *b_n], strict=True))
    close &= all(abs(a[k] - b[k]) <= 1e-9 * (1 + abs(a[k]))
                 for a, b in zip(m_t, m_n, strict=True) for k in a)
    return bool(close)


def route_key(model: BernoulliRBM, batch: int) -> str:
    """``rbm_step|dtype|threads=N|visible x hidden x batch x chains (power-of-two buckets)|
    learning-k|centering``: a cache key."""
    m = model.options
    n_chains = m.n_chains if m.learning == "pcd" else batch
    dims = "x".join(str(routes.bucket(d))
                    for d in (model.n_visible, model.n_hidden, batch, n_chains))
    return (f"{FAMILY}|{str(model.W.dtype).removeprefix('torch.')}|threads="
            f"{torch.get_num_threads()}|{dims}|{m.learning}-{m.k}|"
            f"{'centered' if model.centered else 'plain'}")


def _torch(model: BernoulliRBM, optimizer: torch.optim.Optimizer,
           batch: torch.Tensor) -> dict[str, float]:
    return model._torch_step(batch, {"main": optimizer})


def _numpy_on(threads: int | None):
    def run(model: BernoulliRBM, optimizer: torch.optim.Optimizer,
            batch: torch.Tensor) -> dict[str, float]:
        return NumpyStep(model, optimizer, threads)(batch)
    return run


# "numpy" runs NumPy's BLAS at torch's thread count, "numpy@1" at one (a second BLAS thread on
# a 64 × 20 product costs a scheduler slice whenever the other cores are busy)
IMPLS = {"torch": _torch, "numpy": _numpy_on(None), "numpy@1": _numpy_on(1)}
_UNWATCHED = {name: routes.Chosen(name, IMPLS) for name in IMPLS}


def step_route(model: BernoulliRBM, optimizer: torch.optim.Optimizer,
               batch: torch.Tensor) -> routes.Chosen:
    """The route of this model's updates on batches like ``batch`` (``torch``, ``numpy`` or
    ``numpy@1``), called as ``route(model, optimizer, batch)``: pinned, cached or measured now
    on scratch copies (the model, its optimiser and the global RNG are not touched), and kept
    in :data:`shortrun.routes.MEMO` with the other routes, where the Trainer's thread choice
    (:mod:`shortrun.train.threads`) sees it. A measured choice is not re-timed while training
    (a whole update cannot be repeated on the live model).

    Once a model has a route for a batch shape it keeps it, whatever the thread count later
    (the Trainer drops to one thread after a ``numpy@1`` first step: re-choosing then could
    switch the arithmetic mid-run, and a resumed run, whose first step is again at the full
    thread count, would not repeat the uninterrupted one)."""
    m = model.options
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    settled_key = (batch.dtype, tuple(batch.shape), torch.is_autocast_enabled("cpu"),
                   distributed)
    chosen = model._settled_step_routes.get(settled_key)
    if chosen is not None:
        return chosen
    memo_key = (FAMILY, type(model), model.W.dtype, model.n_visible, model.n_hidden,
                m.learning, m.k, m.n_chains, m.chain, bool(getattr(model, "centered", False)),
                m.momentum > 0, torch.get_num_threads(), *settled_key)
    chosen = routes.MEMO.get(memo_key)
    if chosen is None:
        # the scratch copies' products are not the step's: the Trainer must not count them
        calls = {id(c): c.calls for c in routes.MEMO.values()}
        chosen = _first_route(model, optimizer, batch)
        for c in routes.MEMO.values():
            c.calls = calls.get(id(c), 0)
        routes.MEMO[memo_key] = chosen
    model._settled_step_routes[settled_key] = chosen
    return chosen


def _first_route(model: BernoulliRBM, optimizer: torch.optim.Optimizer,
                 batch: torch.Tensor) -> routes.Chosen:
    pinned = routes.pinned_route(FAMILY, ROUTES)
    if pinned in ROUTES:
        return _UNWATCHED[pinned if pinned == "torch" or applies(model) else FIXED]
    if pinned is not None or not applies(model) or not numpy_works(model):
        return _UNWATCHED[FIXED]
    names = ["torch", "numpy"] + (["numpy@1"] if torch.get_num_threads() > 1 else [])
    calls = {}
    for name in names:
        twin, opt = _twin(model, model.W.dtype, optimizer.param_groups[0]["lr"],
                          optimizer.param_groups[0]["weight_decay"])
        calls[name] = (lambda f=IMPLS[name], twin=twin, opt=opt: f(twin, opt, batch))
    key = route_key(model, len(batch))
    with torch.random.fork_rng(devices=[]):
        name = routes.choose(key, calls)
    return routes.Chosen(name, IMPLS, key, watch=False)
