"""The ``rbm_step`` family: which implementation runs a binary RBM's whole CD-k / PCD-k
update, the model's own torch calls or the NumPy calls of :mod:`shortrun.speed.rbm_numpy`.
The RBM sees one seam, :func:`fast_step` (the metrics, or None when the model's torch step
should run), and :func:`fast_gibbs` for sampling.

The route is chosen by a size rule (:meth:`RBMStep.rule`), not a race: a race of whole updates
would cost more than a small model's whole fit, and the rule gives the races' answers
(docs/architecture.md, "The rbm_step size rule"). The NumPy step still passes a float64
cross-check first. A tensor set keeps the route it first took for a batch shape for the rest
of the process (the Trainer may drop to one thread after the first step: re-choosing could
switch the arithmetic).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from shortrun.speed import engine
from shortrun.speed.rbm_numpy import (
    PerTensor,
    StepOptions,
    Tensors,
    _draw_sweeps,
    gradients,
    numpy_gibbs,
    numpy_step,
)

FAMILY = "rbm_step"
FIXED = "torch"
# with more than one thread, below this many multiply-adds per update (visible × hidden ×
# (batch + chains)) the NumPy step on one BLAS thread runs: scikit-learn's digits example is
# 128 k, rbm_digits 192 k, MNIST CD-1 78 M
NUMPY_BELOW = 1 << 22


def _numpy_on(threads: int | None):
    def run(tensors: Tensors, batch: torch.Tensor, opts: StepOptions,
            optimizer: Any) -> dict[str, float]:
        return numpy_step(tensors, batch, opts, optimizer, threads)
    return run


def _applies(W: torch.Tensor) -> bool:
    return (W.device.type == "cpu" and W.dtype in (torch.float32, torch.float64)
            and not torch.is_autocast_enabled("cpu")
            and not (torch.distributed.is_available() and torch.distributed.is_initialized()))


def _dims(tensors: Tensors, batch: torch.Tensor) -> tuple[int, int, int, int]:
    """visible, hidden, batch and negative-phase rows (the chains, or the batch under CD)."""
    chains = tensors[5]
    (nv, nh), n = tensors[0].shape, len(batch)
    return nv, nh, n, len(chains) if chains is not None else n


def _work(tensors: Tensors, batch: torch.Tensor) -> int:
    nv, nh, n, n_neg = _dims(tensors, batch)
    return nv * nh * (n + n_neg)


class RBMStep(engine.Family):
    """``(tensors, batch, options)`` -> ``torch``, ``numpy`` or ``numpy@1`` (module
    docstring). ``numpy`` runs NumPy's BLAS at torch's thread count, ``numpy@1`` at one."""

    name, routes = FAMILY, engine.FAMILIES[FAMILY]
    impls = {"torch": lambda *a: None, "numpy": _numpy_on(None), "numpy@1": _numpy_on(1)}

    def candidates(self, tensors, batch, opts) -> list[str]:
        if not _applies(tensors[0]):
            return ["torch"]
        return ["torch", "numpy"] + (["numpy@1"] if torch.get_num_threads() > 1 else [])

    def fixed(self, tensors, batch, opts) -> str:
        return FIXED

    def key(self, tensors, batch, opts) -> str:
        """``rbm_step|dtype|threads=N|visible x hidden x batch x chains (power-of-two
        buckets)|learning-k|centering``."""
        dims = "x".join(str(engine.bucket(d)) for d in _dims(tensors, batch))
        return (f"{FAMILY}|{str(tensors[0].dtype).removeprefix('torch.')}|threads="
                f"{torch.get_num_threads()}|{dims}|{opts.learning}-{opts.k}|"
                f"{'centered' if opts.centered else 'plain'}")

    def rule(self, tensors, batch, opts) -> str:
        if torch.get_num_threads() == 1:
            return "numpy"
        return "torch" if _work(tensors, batch) >= NUMPY_BELOW else "numpy@1"

    def check_key(self, route, tensors, batch, opts):
        return opts, tuple(tensors[0].shape)

    def cross_check(self, route, tensors, batch, opts) -> bool:
        """Two float64 updates' gradients, offsets, chains and free energies by the NumPy
        kernels and by :func:`reference_gradients`, from one state and RNG state, agree to
        float64 rounding."""
        if route == "torch":
            return True
        g = torch.Generator().manual_seed(0)
        (nv, nh), pcd = tensors[0].shape, tensors[5] is not None
        n = 8
        state = [torch.randn(s, generator=g, dtype=torch.float64) * 0.3
                 for s in ((nv, nh), (nv,), (nh,))]
        offsets = [torch.rand(d, generator=g, dtype=torch.float64) for d in (nv, nh)]
        state += [*(offsets if opts.centered else (None, None)),
                  (torch.rand(n, nv, generator=g, dtype=torch.float64) < 0.5).double()
                  if pcd else None]
        twins = [[t.clone() if t is not None else None for t in state] for _ in range(2)]
        for i in range(2):
            v = (torch.rand(n, nv, generator=g, dtype=torch.float64) < 0.3).double()
            torch.manual_seed(123 + i)
            got = gradients(tuple(twins[0]), v, opts)  # type: ignore[arg-type]
            grads = [t.grad for t in twins[0][:3]]
            torch.manual_seed(123 + i)
            want, want_grads = reference_gradients(twins[1], v, opts)
            pairs = [*zip(grads, want_grads, strict=True),
                     *zip(twins[0], twins[1], strict=True)]
            if not all(a is b or torch.allclose(a, b, rtol=1e-9, atol=1e-9) for a, b in pairs):
                return False
            if any(abs(got[k] - want[k]) > 1e-9 * (1 + abs(want[k])) for k in want):
                return False
        return True


def reference_gradients(t: list, v: torch.Tensor, opts: StepOptions
                        ) -> tuple[dict[str, float], list[torch.Tensor]]:
    """The update written plainly in torch (Hinton 2002, Eq. 5; centering: Melchior et al.
    2016, Algorithm 1), moving the offsets and chains of ``t = [W, b, c, mu, lam, chains]``
    in place; returns the free energies and the gradients of ``(W, b, c)``."""
    W, b, c, mu, lam, chains = t
    b_eff = b - W @ lam if opts.centered else b
    c_eff = c - mu @ W if opts.centered else c
    h_pos = torch.sigmoid(v @ W + c_eff)
    x = chains if chains is not None else v
    h = torch.sigmoid(x @ W + c_eff)
    for u_h, u_v in _draw_sweeps(opts.k, len(x), W.shape[1], W.shape[0], W):
        p_v = torch.sigmoid((torch.from_numpy(u_h) < h).double() @ W.t() + b_eff)
        x = (torch.from_numpy(u_v) < p_v).double()
        h = torch.sigmoid(x @ W + c_eff)
    if chains is not None:
        chains.copy_(x)

    def free_energy(rows: torch.Tensor) -> float:
        return float((-(rows @ b_eff) - F.softplus(rows @ W + c_eff).sum(1)).mean())

    f_pos, f_neg = free_energy(v), free_energy(x)
    if opts.centered:
        new_mu = mu + opts.offset_rate * (v.mean(0) - mu)
        new_lam = lam + opts.offset_rate * (h_pos.mean(0) - lam)
        b += W @ (new_lam - lam)
        c += (new_mu - mu) @ W
        mu.copy_(new_mu)
        lam.copy_(new_lam)
    xd, xm = (v - mu, x - mu) if opts.centered else (v, x)
    hd, hm = (h_pos - lam, h - lam) if opts.centered else (h_pos, h)
    grads = [xm.t() @ hm / len(xm) - xd.t() @ hd / len(xd),
             xm.mean(0) - xd.mean(0), hm.mean(0) - hd.mean(0)]
    return {"loss": f_pos - f_neg, "energy_pos": f_pos, "energy_neg": f_neg}, grads


RBM_STEP = RBMStep()
# per weight tensor: the route it took for each batch shape (kept for the run: module docstring)
_SETTLED = PerTensor()


def step_route(tensors: Tensors, batch: torch.Tensor, opts: StepOptions) -> engine.Chosen:
    """The route of these tensors' updates on batches like ``batch``, settled once per batch
    shape (and kept in :data:`shortrun.speed.engine.MEMO`, where the Trainer's thread choice
    sees it)."""
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    shape_key = (batch.dtype, tuple(batch.shape), torch.is_autocast_enabled("cpu"),
                 distributed)
    settled = _SETTLED.state(tensors[0])
    chosen = settled.get(shape_key)
    if chosen is None:
        W, chains = tensors[0], tensors[5]
        memo_key = (FAMILY, W.dtype, tuple(W.shape), opts,
                    None if chains is None else len(chains), torch.get_num_threads(),
                    *shape_key)
        chosen = settled[shape_key] = engine.route(RBM_STEP, memo_key, tensors, batch, opts)
    return chosen


def fast_step(tensors: Tensors, batch: torch.Tensor, opts: StepOptions,
              optimizer: Any) -> dict[str, float] | None:
    """One update by the NumPy step when that is this call's route (then the metrics), else
    None: the model runs its own torch step."""
    chosen = step_route(tensors, batch, opts)
    if chosen.name == "torch":
        return None
    return chosen(tensors, batch, opts, optimizer)  # through the route: the Trainer counts it


def fast_gibbs(W: torch.Tensor, params: Any, v: torch.Tensor, n_steps: int,
               generator: torch.Generator | None = None) -> torch.Tensor | None:
    """``n_steps`` block-Gibbs sweeps by NumPy calls when the updates of ``W`` took a NumPy
    route in this process (the sampler follows the step: the same products and elementwise
    calls), else None (the model samples by torch)."""
    settled = _SETTLED.state(W)
    if not settled or any(c.name == "torch" for c in settled.values()) or not _applies(W):
        return None
    return numpy_gibbs(params, v, n_steps, generator)
