"""The binary RBM's whole CD-k / PCD-k update in NumPy: the fast candidate of the ``rbm_step``
family (:mod:`shortrun.speed.rbm_step` says why and when).

The arithmetic is that of :class:`shortrun.models.rbm_learning.RBMBase` with
:class:`shortrun.models.rbm.BernoulliRBM`'s centering (Melchior, Fischer & Wiskott 2016,
Algorithm 1) and torch's SGD (momentum, weight decay on ``W``): the same positive phase, the
same Gibbs sweeps (Hinton 2002, Eq. 5) drawing the *same* uniforms from torch's RNG in the same
order (:func:`shortrun.energies.rbm.uniform`), the same gradient and update. σ and softplus
are torch's own kernels run on NumPy memory; only the products' summation order differs.
The optimiser's update is :func:`numpy_sgd` for one that declares ``numpy_form``, else its own
``step()``. :func:`match_blas_threads` caps NumPy's BLAS pool at torch's thread count,
process-wide, so the two pools do not spin against each other.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from shortrun.energies.rbm import UNIFORM_NUMPY_FROM, uniform

if TYPE_CHECKING:
    from shortrun.energies.rbm import BernoulliRBMParams


class StepOptions(NamedTuple):
    """What the update needs beyond tensors: ``learning`` (cd | pcd), ``k`` Gibbs sweeps,
    centering (Melchior et al. 2016) and its offsets' running-mean rate."""

    learning: str
    k: int
    centered: bool = False
    offset_rate: float = 0.01


# the tensors of one binary RBM's update: W, b, c (parameters), mu, lam (centering offsets;
# None when not centered) and the persistent chains (None under CD)
Tensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor, "torch.Tensor | None",
                "torch.Tensor | None", "torch.Tensor | None"]


_blas_threads: int | None = None


def match_blas_threads(threads: int | None = None) -> None:
    """Give NumPy's BLAS torch's thread count (``train.threads``), or ``threads``, once per
    change: a process-wide cap (threadpoolctl) on every NumPy BLAS call the step makes."""
    global _blas_threads
    n = threads or torch.get_num_threads()
    if n != _blas_threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n, user_api="blas")
        _blas_threads = n


def _sigmoid_into(src: torch.Tensor, out: torch.Tensor) -> None:
    """``out = σ(src)`` by the torch step's own kernel, on NumPy memory (the same bits)."""
    torch.sigmoid(src, out=out)


def _softplus_rows(a: torch.Tensor) -> np.ndarray:
    """``Σⱼ softplus(aⱼ)`` per row, by the torch step's own ``F.softplus`` (the same bits)."""
    return torch.nn.functional.softplus(a).sum(1).numpy()


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
                 t_a: torch.Tensor, t_h: torch.Tensor) -> None:
    """``a = xW + c`` and ``h = σ(a)`` into ``a`` (``t_a``'s NumPy view) and ``t_h``."""
    np.matmul(x, W, out=a)
    a += c
    _sigmoid_into(t_a, t_h)


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
           s: _SweepArrays) -> None:
    """One sweep ``v → h → v′`` (Hinton 2002, Eq. 5) in place, with the drawn uniforms:
    ``h = [u_h < p(h | v)]``, ``v′ = [u_v < p(v | h)]``, then ``p(h | v′)``."""
    np.less(u_h, s.h, out=u_h, casting="unsafe")
    np.matmul(u_h, W.T, out=s.a_vis)
    s.a_vis += b
    _sigmoid_into(s.t_a_vis, s.t_p_vis)
    np.less(u_v, s.p_vis, out=s.x, casting="unsafe")
    _hidden_into(s.x, W, c, s.a, s.t_a, s.t_h)


class _Workspace:
    """What one update reads and writes, made once per tensor set and batch size: NumPy views
    of the parameters, offsets, chains and gradients (made once: ``.numpy()`` is not free and
    an update needs two dozen), and scratch arrays laid out so that nothing is concatenated:
    data rows first, chain rows after, as the free energies and ``Wᵀ``'s gradient stack them."""

    def __init__(self, tensors: Tensors, n_pos: int, opts: StepOptions, key: tuple) -> None:
        self.tensors, self.key = tensors, key
        W_t, b_t, c_t, mu_t, lam_t, chains_t = tensors
        self.params = (W_t, b_t, c_t)
        dtype = W_t.dtype
        (nv, nh), k = W_t.shape, opts.k
        self.pcd = chains_t is not None
        self.n_pos = n_pos
        self.n_neg = chains_t.shape[0] if chains_t is not None else n_pos
        n = n_pos + self.n_neg
        self.W, self.b, self.c = (p.detach().numpy() for p in self.params)
        self.mu, self.lam = (None, None) if mu_t is None else (mu_t.numpy(), lam_t.numpy())
        self.chains = chains_t.numpy() if chains_t is not None else None

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
        self.grads = tuple(pair(*p.shape) for p in self.params)
        self.k, self.nh, self.nv = k, nh, nv
        self.t_u = torch.empty(k * self.n_neg * (nh + nv), dtype=dtype)  # the step's uniforms

    def uniforms(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The k sweeps' (hidden, visible) uniforms, drawn from torch's global RNG."""
        return _draw_sweeps(self.k, self.n_neg, self.nh, self.nv, self.t_u, out=self.t_u)


class PerTensor(dict):
    """``state(t)``: a dict of state kept for tensor ``t`` while it lives (a
    ``WeakKeyDictionary`` cannot hold tensors: their ``==`` is elementwise)."""

    def state(self, t: torch.Tensor) -> dict:
        k = id(t)
        entry = self.get(k)
        if entry is None or entry[0]() is not t:
            def drop(ref: weakref.ref, k: int = k) -> None:
                if self.get(k, (None,))[0] is ref:
                    del self[k]
            entry = self[k] = (weakref.ref(t, drop), {})
        return entry[1]


# per weight tensor: its workspace (rebuilt when a tensor it views was replaced)
_WORKSPACES = PerTensor()


def _workspace(tensors: Tensors, n_pos: int, opts: StepOptions) -> _Workspace:
    key = (n_pos, opts, *(t.data_ptr() for t in tensors if t is not None))
    kept = _WORKSPACES.state(tensors[0])
    ws = kept.get("ws")
    if (ws is None or ws.key != key
            or not all(t is u for t, u in zip(tensors, ws.tensors, strict=True))):
        ws = kept["ws"] = _Workspace(tensors, n_pos, opts, key)
    return ws


def gradients(tensors: Tensors, batch: torch.Tensor, opts: StepOptions,
              blas_threads: int | None = None) -> dict[str, float]:
    """The update up to the optimiser: block Gibbs from the data (CD) or the chains (PCD),
    the centering offsets moved (with their bias shifts), and the gradients written into each
    parameter's ``.grad``; returns the logged free energies."""
    match_blas_threads(blas_threads)
    n_pos = len(batch)
    ws = _workspace(tensors, n_pos, opts)
    W, b, c, mu, lam = ws.W, ws.b, ws.c, ws.mu, ws.lam
    n_neg, centered = ws.n_neg, opts.centered
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
        _hidden_into(x, W, c_eff, a, ws.t_a, ws.t_h)
    else:  # CD: the chains start at the data
        _hidden_into(v, W, c_eff, a_pos, ws.t_a_pos, ws.t_h_pos)
        x_neg[...], a_neg[...], h_neg[...] = v, a_pos, h_pos
    for u_h, u_v in ws.uniforms():  # block Gibbs, as gibbs_step draws
        _sweep(u_h, u_v, W, b_eff, c_eff, ws.neg)
    if ws.pcd:
        ws.chains[...] = x_neg
    # free energies F = −xᵀb − Σ softplus(a), data rows then chain rows
    f = x @ b_eff
    f += _softplus_rows(ws.t_a)
    f_pos = -float(np.add.reduce(f[:n_pos])) / n_pos
    f_neg = -float(np.add.reduce(f[n_pos:])) / n_neg

    if centered:  # BernoulliRBM.before_gradients: move the offsets, shift the biases
        rate = opts.offset_rate
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
    return {"loss": f_pos - f_neg, "energy_pos": f_pos, "energy_neg": f_neg}


def numpy_step(tensors: Tensors, batch: torch.Tensor, opts: StepOptions, optimizer: Any,
               blas_threads: int | None = None) -> dict[str, float]:
    """One whole update: :func:`gradients`, then the optimiser's step (its NumPy form when it
    declares one, :func:`numpy_sgd`)."""
    metrics = gradients(tensors, batch, opts, blas_threads)
    if getattr(optimizer, "numpy_form", False):
        numpy_sgd(optimizer)
    else:
        optimizer.step()
    return metrics


_VIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # optimizer -> NumPy views


def numpy_sgd(opt: Any) -> None:
    """The RBM's SGD update (``g ← ∇ + λθ; m ← μm + g; θ ← θ − lr·m``, torch's SGD without
    dampening or Nesterov) computed by NumPy on the tensors' memory: for a small RBM torch's
    optimiser calls cost more than the rest of the NumPy update. An optimiser with step hooks,
    or with parameters NumPy cannot view, takes its own ``step()``."""
    params = [p for g in opt.param_groups for p in g["params"]]
    if opt.hooked or not all(p.device.type == "cpu"
                             and p.dtype in (torch.float32, torch.float64) for p in params):
        opt.step()
        return
    views = _VIEWS.get(opt)
    if views is None:
        views = _VIEWS[opt] = {}
    state = opt.state
    for group in opt.param_groups:
        lr, momentum, decay = group["lr"], group["momentum"], group["weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            buf_t = state[p].get("momentum_buffer") if momentum else None
            g, pn, buf = _views(views, p, buf_t)
            if decay:
                g = g + decay * pn
            if momentum:
                if buf is None:
                    state[p]["momentum_buffer"] = torch.from_numpy(np.array(g, copy=True))
                else:
                    buf *= momentum
                    buf += g
                    g = buf
            pn -= g * lr


def _views(views: dict, p: torch.Tensor, buf_t: torch.Tensor | None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """NumPy views of ``p``'s gradient, ``p`` and its momentum buffer, kept while the three
    tensors are the same objects on the same memory."""
    grad = p.grad
    key = (p.data_ptr(), id(grad), grad.data_ptr(), id(buf_t),
           None if buf_t is None else buf_t.data_ptr())
    cached = views.get(id(p))
    if cached is None or cached[0] != key:
        cached = views[id(p)] = (key, (grad.numpy(), p.detach().numpy(),
                                       None if buf_t is None else buf_t.numpy()))
    return cached[1]


# a chunk of the sampler's uniforms: at most this many numbers (4 MiB in float32) per draw
GIBBS_CHUNK = 1 << 20


def numpy_gibbs(params: BernoulliRBMParams, v: torch.Tensor, n_steps: int,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """``n_steps`` block-Gibbs sweeps from ``v`` (:func:`shortrun.samplers.gibbs.block_gibbs`
    at β = 1, Hinton 2002 Eq. 5) as NumPy calls, drawing the same uniforms: per sweep
    ``n × n_hidden`` then ``n × n_visible`` numbers from ``generator`` (torch's global RNG
    when None), in chunks of sweeps. Returns the final visible state. For a small RBM the torch
    sampler spends its time in calls; this one makes half as many."""
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


