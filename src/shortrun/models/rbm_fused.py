"""The binary RBM's whole CD-k / PCD-k update in NumPy: the fast candidate of the ``rbm_step``
route family (:mod:`shortrun.models.rbm_step_route` chooses between it and the torch step).

Why a second implementation of one update: for a small RBM (``rbm_digits``: 64 × 20, batch
50, 100 chains) each product is a few thousand FLOPs, and the update's ~75 torch calls cost
microseconds of dispatch each, several times what scikit-learn's NumPy BernoulliRBM spends a
step, while NumPy's per-call cost is about a microsecond (bench/README, "Measurements behind
the speed layer"). For a large RBM (784 × 500) the products dominate and torch's measured GEMM
routes (:mod:`shortrun.products`) may win instead. So the step itself is a route, chosen per
machine like the products (:func:`~shortrun.models.rbm_step_route.step_route`): both
candidates run a few updates of a scratch copy of the model on the actual batch shape, and the
faster is kept in the route cache.

The arithmetic is exactly that of :class:`shortrun.models.rbm_learning.RBMBase` with
:class:`shortrun.models.rbm.BernoulliRBM`'s centering (Melchior, Fischer & Wiskott 2016,
Algorithm 1) and torch's SGD (momentum, weight decay on ``W``): the same positive phase, the
same Gibbs sweeps (Hinton 2002, Eq. 5) drawing the *same* uniforms from torch's RNG in the same
order (:func:`shortrun.energies.rbm.uniform`), the same gradient and update. σ and softplus
are torch's own kernels run on NumPy memory; only the summation order of the products differs,
so before the route may be chosen it must agree with the torch step in float64 to rounding over
two updates (:func:`~shortrun.models.rbm_step_route.numpy_works`).

Scope: ``model.learning`` cd or pcd, ``model.chain`` gibbs, float32/float64 parameters on the
CPU, no bf16 autocast, one process, and the optimiser the RBM builds. Everything else (FPCD,
parallel tempering, the Gaussian RBM, data-parallel runs) takes the torch step. The parameter
update is the optimiser's own ``step()`` on the gradients written into ``p.grad``, as in the torch
step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from shortrun.energies.rbm import UNIFORM_NUMPY_FROM, uniform
from shortrun.models.rbm_sgd import RBMSGD
from shortrun.products import match_blas_threads

if TYPE_CHECKING:
    from shortrun.energies.rbm import BernoulliRBMParams

# A BernoulliRBM, named by its role: importing models/rbm.py here would close an import circle
# (rbm -> rbm_learning -> rbm_fused -> rbm)
RBM = torch.nn.Module



# torch splits an elementwise op over its OpenMP threads from this many elements; those threads
# then spin for a while and starve NumPy's BLAS threads (a 784 × 500 CD-1 update at 2 threads
# ran several times slower), so where NumPy's BLAS runs more than one
# thread, larger arrays take NumPy's forms
TORCH_SERIAL_BELOW = 32768


def _sigmoid_into(src: torch.Tensor, out: torch.Tensor, any_size: bool = False) -> None:
    """``out = σ(src)``: by the torch step's own kernel on NumPy memory below
    :data:`TORCH_SERIAL_BELOW` elements, or at any size with ``any_size`` (NumPy's BLAS on one
    thread: nothing to starve), where it is faster than NumPy's form. Otherwise as
    ``(1 + tanh(a/2)) / 2`` in NumPy (overflow-free, within 1e-7 of the exact value in
    float32)."""
    if any_size or src.numel() < TORCH_SERIAL_BELOW:
        torch.sigmoid(src, out=out)
        return
    o = out.numpy()
    np.multiply(src.numpy(), 0.5, out=o)
    np.tanh(o, out=o)
    o *= 0.5
    o += 0.5


def _softplus_rows(a: torch.Tensor, any_size: bool = False) -> np.ndarray:
    """``Σⱼ softplus(aⱼ)`` per row: by the torch step's own ``F.softplus`` below
    :data:`TORCH_SERIAL_BELOW` elements or with ``any_size`` (as for :func:`_sigmoid_into`),
    else as
    ``max(a, 0) + log(1 + exp(−|a|))`` in NumPy (overflow-free; ``log`` rather than ``log1p``
    because NumPy vectorises it, and the argument in [1, 2] keeps the error at rounding)."""
    if any_size or a.numel() < TORCH_SERIAL_BELOW:
        return torch.nn.functional.softplus(a).sum(1).numpy()
    x = a.numpy()
    out = np.abs(x)
    np.negative(out, out=out)
    np.exp(out, out=out)
    out += 1.0
    np.log(out, out=out)
    out += np.maximum(x, 0.0)
    return np.add.reduce(out, axis=1)


def _draw_sweeps(k: int, n: int, n_hidden: int, n_visible: int, like: torch.Tensor,
                 generator: torch.Generator | None = None, out: torch.Tensor | None = None
                 ) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (hidden, visible) uniforms of ``k`` sweeps of ``n`` chains, the numbers
    :func:`uniform` draws for :func:`shortrun.samplers.gibbs.gibbs_step`. torch's CPU generator
    fills a tensor element by element, so one ``torch.rand`` of the k sweeps' total (into
    ``out`` when given) is the same numbers as the 2k draws, in their order (hidden then
    visible, sweep by sweep); draws large enough for ``uniform``'s NumPy generator are drawn
    one by one, as the torch step draws them."""
    if max(n * n_hidden, n * n_visible) >= UNIFORM_NUMPY_FROM:
        return [(uniform((n, n_hidden), like, generator).numpy(),
                 uniform((n, n_visible), like, generator).numpy()) for _ in range(k)]
    per_h, per_sweep = n * n_hidden, n * (n_hidden + n_visible)
    u = torch.rand(k * per_sweep, generator=generator, dtype=like.dtype, out=out).numpy()
    return [(u[i * per_sweep:i * per_sweep + per_h].reshape(n, n_hidden),
             u[i * per_sweep + per_h:(i + 1) * per_sweep].reshape(n, n_visible))
            for i in range(k)]


def _hidden_into(x: np.ndarray, W: np.ndarray, c: np.ndarray, a: np.ndarray,
                 t_a: torch.Tensor, t_h: torch.Tensor, any_size: bool = False) -> None:
    """``a = xW + c`` and ``h = σ(a)`` into ``a`` (``t_a``'s NumPy view) and ``t_h``."""
    np.matmul(x, W, out=a)
    a += c
    _sigmoid_into(t_a, t_h, any_size)


class _SweepArrays:
    """The arrays one block-Gibbs sweep of a set of chains reads and writes: the visible states
    ``x``, hidden inputs and probabilities, visible inputs and probabilities, each NumPy array
    with the torch tensor on the same memory that torch's σ writes through."""

    def __init__(self, x: np.ndarray, t_a: torch.Tensor, t_h: torch.Tensor) -> None:
        n, nv = x.shape
        self.x, self.t_a, self.t_h = x, t_a, t_h
        self.a, self.h = t_a.numpy(), t_h.numpy()
        self.t_a_vis = torch.empty(n, nv, dtype=t_a.dtype)
        self.t_p_vis = torch.empty(n, nv, dtype=t_a.dtype)
        self.a_vis, self.p_vis = self.t_a_vis.numpy(), self.t_p_vis.numpy()


def _sweep(u_h: np.ndarray, u_v: np.ndarray, W: np.ndarray, b: np.ndarray, c: np.ndarray,
           s: _SweepArrays, any_size: bool = False) -> None:
    """One sweep ``v → h → v′`` (Hinton 2002, Eq. 5) in place, with the drawn uniforms:
    ``h = [u_h < p(h | v)]``, ``v′ = [u_v < p(v | h)]``, then ``p(h | v′)``."""
    np.less(u_h, s.h, out=u_h, casting="unsafe")
    np.matmul(u_h, W.T, out=s.a_vis)
    s.a_vis += b
    _sigmoid_into(s.t_a_vis, s.t_p_vis, any_size)
    np.less(u_v, s.p_vis, out=s.x, casting="unsafe")
    _hidden_into(s.x, W, c, s.a, s.t_a, s.t_h, any_size)


class _Workspace:
    """What one update reads and writes, made once per model, batch size and tensor set:
    NumPy views of the parameters, offsets, chains and gradients (``.numpy()`` costs ~2.4 µs
    and an update needs two dozen), and scratch arrays laid out so that nothing is
    concatenated: data rows first, chain rows after, as the free energies and ``Wᵀ``'s
    gradient stack them."""

    def __init__(self, model: RBM, n_pos: int, tensors: tuple[torch.Tensor, ...],
                 key: tuple) -> None:
        self.tensors, self.key = tensors, key
        self.params = tensors[:3]
        dtype = model.W.dtype
        nv, nh, k = model.n_visible, model.n_hidden, model.options.k
        self.pcd = model.options.learning == "pcd"
        self.n_pos = n_pos
        self.n_neg = model.source.chains.shape[0] if self.pcd else n_pos
        n = n_pos + self.n_neg
        self.W, self.b, self.c = (p.detach().numpy() for p in (model.W, model.b, model.c))
        self.mu, self.lam = model.mu.numpy(), model.lam.numpy()
        self.chains = model.source.chains.numpy() if self.pcd else None

        def pair(*shape: int) -> tuple[torch.Tensor, np.ndarray]:
            t = torch.empty(shape, dtype=dtype)
            return t, t.numpy()

        self.t_a, self.a = pair(n, nh)  # hidden inputs
        self.t_h, self.h = pair(n, nh)  # hidden probabilities
        self.x = np.empty((n, nv), dtype=self.W.dtype)  # visible states
        self.t_a_pos, self.t_h_pos = self.t_a[:n_pos], self.t_h[:n_pos]
        self.neg = _SweepArrays(self.x[n_pos:], self.t_a[n_pos:], self.t_h[n_pos:])
        # row weights of the gradient ∂/∂θ [mean F(v_data) − mean F(v_k)] (a data row's
        # statistic counts −1/n_pos, a chain row's +1/n_neg) and of the data mean
        self.row_weights = np.concatenate([np.full(n_pos, -1.0 / n_pos),
                                           np.full(self.n_neg, 1.0 / self.n_neg)]
                                          ).astype(self.W.dtype)
        self.data_mean_weights = np.full(n_pos, 1.0 / n_pos, dtype=self.W.dtype)
        self.grads = tuple(pair(*p.shape) for p in (model.W, model.b, model.c))
        self.k, self.nh, self.nv = k, nh, nv
        self.t_u = torch.empty(k * self.n_neg * (nh + nv), dtype=dtype)  # the step's uniforms

    def uniforms(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The k sweeps' (hidden, visible) uniforms, drawn from torch's global RNG."""
        return _draw_sweeps(self.k, self.n_neg, self.nh, self.nv, self.t_u, out=self.t_u)


def _workspace(model: RBM, n_pos: int) -> _Workspace:
    """The model's workspace for batches of ``n_pos``, rebuilt when an option it depends on
    changed or a tensor it views was replaced (``.to()``, a new chain set)."""
    m = model.options
    params, buffers = model._parameters, model._buffers
    tensors = (params["W"], params["b"], params["c"], buffers["mu"], buffers["lam"],
               *((model.source.chains,) if m.learning == "pcd" else ()))
    key = (n_pos, m.learning, m.k, *(t.data_ptr() for t in tensors))
    ws = model.__dict__.get("_numpy_workspace")
    if (ws is None or ws.key != key or len(ws.tensors) != len(tensors)
            or not all(t is u for t, u in zip(tensors, ws.tensors, strict=True))):
        ws = _Workspace(model, n_pos, tensors, key)
        model.__dict__["_numpy_workspace"] = ws
    return ws


class NumpyStep:
    """One update of ``model`` (a :class:`BernoulliRBM`) with ``optimizer`` (its SGD), on NumPy
    views of the parameters, buffers and momentum buffers: ``step(batch) -> metrics``."""

    def __init__(self, model: RBM, optimizer: torch.optim.Optimizer,
                 blas_threads: int | None = None) -> None:
        self.model, self.optimizer, self.blas_threads = model, optimizer, blas_threads

    def __call__(self, batch: torch.Tensor) -> dict[str, float]:
        model = self.model
        match_blas_threads(self.blas_threads)
        serial_blas = (self.blas_threads or torch.get_num_threads()) == 1
        n_pos = len(batch)
        ws = _workspace(model, n_pos)
        W, b, c, mu, lam = ws.W, ws.b, ws.c, ws.mu, ws.lam
        n_neg, centered = ws.n_neg, model.centered
        # rows: x = [data; chains], a and h their hidden inputs and probabilities
        x, a, h = ws.x, ws.a, ws.h
        v, x_neg = x[:n_pos], x[n_pos:]
        a_pos, a_neg, h_pos, h_neg = a[:n_pos], a[n_pos:], h[:n_pos], h[n_pos:]
        data = (batch.detach() if batch.requires_grad else batch).numpy()
        np.copyto(v, data.reshape(n_pos, -1), casting="unsafe")
        # the standard-form parameters of the step (BernoulliRBM.params)
        b_eff = b - W @ lam if centered else b
        c_eff = c - mu @ W if centered else c

        # the positive phase and (PCD) the chains' hidden state in one product
        if ws.pcd:
            x_neg[...] = ws.chains
            _hidden_into(x, W, c_eff, a, ws.t_a, ws.t_h, serial_blas)
        else:  # CD: the chains start at the data
            _hidden_into(v, W, c_eff, a_pos, ws.t_a_pos, ws.t_h_pos, serial_blas)
            x_neg[...], a_neg[...], h_neg[...] = v, a_pos, h_pos
        for u_h, u_v in ws.uniforms():  # block Gibbs, as gibbs_step draws
            _sweep(u_h, u_v, W, b_eff, c_eff, ws.neg, serial_blas)
        if ws.pcd:
            ws.chains[...] = x_neg
        # free energies F = −xᵀb − Σ softplus(a), data rows then chain rows
        f = x @ b_eff
        f += _softplus_rows(ws.t_a, serial_blas)
        f_pos = -float(np.add.reduce(f[:n_pos])) / n_pos
        f_neg = -float(np.add.reduce(f[n_pos:])) / n_neg

        if centered:  # BernoulliRBM.before_gradients: move the offsets, shift the biases
            rate = model.options.offset_rate
            new_mu = mu + rate * (ws.data_mean_weights @ v - mu)
            new_lam = lam + rate * (ws.data_mean_weights @ h_pos - lam)
            b += W @ (new_lam - lam)
            c += (new_mu - mu) @ W
            mu[...], lam[...] = new_mu, new_lam
            x -= mu
            h -= lam
        # write_gradients: ∂/∂θ [mean F(v_data) − mean F(v_k)] as row-weighted sums, W's as
        # one product over data and chain rows
        (t_g_W, g_W), (t_g_b, g_b), (t_g_c, g_c) = ws.grads
        w = ws.row_weights
        np.matmul(w, x, out=g_b)
        np.matmul(w, h, out=g_c)
        h *= w[:, None]
        np.matmul(x.T, h, out=g_W)
        for p, g in zip(ws.params, (t_g_W, t_g_b, t_g_c), strict=True):
            if p.grad is not g:
                p.grad = g
        opt = self.optimizer
        opt.step_numpy() if isinstance(opt, RBMSGD) else opt.step()
        return {"loss": f_pos - f_neg, "energy_pos": f_pos, "energy_neg": f_neg}


# a chunk of the sampler's uniforms: at most this many numbers (4 MiB in float32) per draw
GIBBS_CHUNK = 1 << 20


def numpy_gibbs(params: BernoulliRBMParams, v: torch.Tensor, n_steps: int,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """``n_steps`` block-Gibbs sweeps from ``v`` (:func:`shortrun.samplers.gibbs.block_gibbs`
    at β = 1, Hinton 2002 Eq. 5) as NumPy calls, drawing the same uniforms: per sweep
    ``n × n_hidden`` then ``n × n_visible`` numbers from ``generator`` (torch's global RNG
    when None), in chunks of sweeps. Returns the final visible state.

    For ``rbm_digits``' sample grid (64 chains, 64 × 20, 1000 sweeps) the torch sampler spends
    its time in calls; this one makes half as many."""
    W = params.W.detach().numpy()
    b, c = params.b.detach().numpy(), params.c.detach().numpy()
    n, (nv, nh) = len(v), W.shape
    t_v = v.detach().clone().contiguous()
    chains = _SweepArrays(t_v.numpy(), torch.empty(n, nh, dtype=v.dtype),
                          torch.empty(n, nh, dtype=v.dtype))
    _hidden_into(chains.x, W, c, chains.a, chains.t_a, chains.t_h)
    per_chunk = max(1, GIBBS_CHUNK // (n * (nh + nv)))
    for done in range(0, n_steps, per_chunk):
        for u_h, u_v in _draw_sweeps(min(per_chunk, n_steps - done), n, nh, nv, v, generator):
            _sweep(u_h, u_v, W, b, c, chains)
    return t_v


