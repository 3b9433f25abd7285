"""MLP energy for low-dimensional data.

With SiLU activations (the default) it also offers :meth:`MLPEnergy.energy_and_grad`, the energy
and its input gradient in one explicit forward-and-backward pass under ``no_grad`` (no autograd
graph); the Langevin kernel uses it when present, which is where most of a chain's time goes.
It is checked against autograd in the tests (tests/energies/test_mlp_energy.py).

The pass's matrix products run by one of two routes, the ``mlp`` family of
:mod:`shortrun.routes`: ``torch`` (``F.linear``, torch's BLAS) or ``onednn``
(``mkldnn._linear_pointwise``, the op ``torch.compile`` itself lowers ``nn.Linear`` to on CPU),
each at the current thread count or at one (``torch@1``). Which wins depends on the machine: oneDNN
won a 10,000-chain Langevin step on one CPU measured and lost it on another (bench/results_ebm.md).
So on CPU the candidates are timed on the actual input at its first pass (per row bucket, network
shape, dtype and threads; :func:`route_for`) and the winner is cached.
Every candidate passed the float64 cross-check first (:func:`route_works`). Same arithmetic, a
different summation order. ``SHORTRUN_ROUTE_MLP=torch|onednn`` pins a route; the ``onednn``
pin is the rule used before measurement (:func:`_use_onednn`: oneDNN from 256 rows).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from shortrun import routes
from shortrun.onednn import onednn_linear, onednn_usable

FAMILY = "mlp"
ROUTES = routes.FAMILIES[FAMILY]


def _use_onednn(x: torch.Tensor) -> bool:
    # Below a few hundred rows oneDNN's per-call set-up costs more than it saves.
    return x.shape[0] >= 256 and onednn_usable(x)


def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None,
            onednn: bool) -> torch.Tensor:
    """``x @ w.T + b`` (``F.linear``), through oneDNN where ``onednn``."""
    if onednn:
        return onednn_linear(x, w.contiguous(), b)
    return F.linear(x, w, b)


# ``aten.silu_backward`` is ATen's fused SiLU derivative (one pass, what autograd itself runs). It
# is not public API, so a torch without it gets the same derivative from public element-wise ops:
# silu'(z) = σ(z) (1 + z (1 − σ(z))).
_FUSED_SILU_BACKWARD: bool = hasattr(torch.ops.aten, "silu_backward")


def _silu_backward(g: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """``g ⊙ silu′(z)``."""
    if _FUSED_SILU_BACKWARD:
        return torch.ops.aten.silu_backward(g, z)
    s = torch.sigmoid(z)
    return g * s * (1 + z * (1 - s))


ACTIVATIONS = {"silu": nn.SiLU, "gelu": nn.GELU, "relu": nn.ReLU, "elu": nn.ELU,
               "lrelu": lambda: nn.LeakyReLU(0.2), "tanh": nn.Tanh, "softplus": nn.Softplus}


def activation(name: str) -> nn.Module:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]()


class MLPEnergy(nn.Module):
    """``E(x) = MLP(flatten(x))`` with ``depth`` hidden layers of width ``hidden``."""

    def __init__(self, in_dim: int, hidden: int = 128, depth: int = 2,
                 act: str = "silu", spectral_norm: bool = False) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = in_dim
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), activation(act)]
            width = hidden
        layers.append(nn.Linear(width, 1))
        if spectral_norm:
            layers = [nn.utils.parametrizations.spectral_norm(m) if isinstance(m, nn.Linear)
                      else m for m in layers]
        self.net = nn.Sequential(*layers)
        self._fast_grad = act == "silu" and not spectral_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1)).squeeze(1)

    #: rows per block of the fast pass on CPU; a 2,048 × 128 float32 activation (1 MiB) stays
    #: in L2 (a GPU takes all rows at once)
    block_rows: int = 2048

    @torch.no_grad()
    def energy_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(E(x), ∇ₓE(x))`` without autograd, or None where only autograd applies.

        One forward pass keeps the pre-activations ``zₗ``; the backward pass is the chain rule
        written out, ``g ← (g ⊙ silu′(zₗ)) Wₗ`` from ``g = w_out``, with ATen's fused
        ``silu_backward`` (one pass, as autograd does) and no graph bookkeeping. Rows are done
        in blocks of :attr:`block_rows` so that the activations stay in cache; the products
        take the route :func:`route_for` settles (module docstring).
        """
        # Under autocast (train.precision=bf16) autograd applies the cast policy op by op;
        # the hand-written pass would mix dtypes, so it steps aside.
        if not self._fast_grad or torch.is_autocast_enabled(x.device.type):
            return None
        flat = x.flatten(1)
        energy, grad = route_for(self, flat)(self, flat)
        return energy, grad.reshape(x.shape)

    def pass_with(self, flat: torch.Tensor, onednn: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """The fast pass over ``(n, d)`` rows with the products through oneDNN or not."""
        linears = [m for m in self.net if isinstance(m, nn.Linear)]
        n = flat.shape[0]
        # Backward products g @ W = linear(g, Wᵀ): transpose each weight once per call.
        weights_t = [lin.weight.t().contiguous() if onednn else lin.weight.t()
                     for lin in linears[:-1]]
        last = linears[-1]
        w_out, b_out = last.weight[0], last.bias
        # blocks keep a CPU's activations in cache; on a GPU they only multiply the kernel
        # launches (H200, 10k rows: 1030 µs blocked, 170 µs whole, 653 µs plain autograd)
        if n <= self.block_rows or flat.device.type != "cpu":
            return self._energy_and_grad_rows(flat, linears, weights_t, w_out, b_out, onednn)
        energy = flat.new_empty(n)
        grad = torch.empty_like(flat)
        blocks = -(-n // self.block_rows)
        bounds = [n * k // blocks for k in range(blocks + 1)]  # near-equal blocks
        for i, j in zip(bounds[:-1], bounds[1:], strict=True):
            e, g = self._energy_and_grad_rows(flat[i:j], linears, weights_t, w_out, b_out,
                                              onednn)
            energy[i:j] = e
            grad[i:j] = g
        return energy, grad

    @staticmethod
    def _energy_and_grad_rows(h, linears, weights_t, w_out, b_out, onednn):
        pre = []
        for lin in linears[:-1]:
            z = _linear(h, lin.weight, lin.bias, onednn)
            pre.append(z)
            h = F.silu(z)
        energy = torch.addmv(b_out, h, w_out) if b_out is not None else h @ w_out
        g = w_out.expand(h.shape[0], -1)
        for w_t, z in zip(reversed(weights_t), reversed(pre), strict=True):
            g = _linear(_silu_backward(g, z), w_t, None, onednn)
        return energy, g


# --- the routes of the fast pass ------------------------------------------------------------

Pass = Callable[[MLPEnergy, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def _torch_pass(energy: MLPEnergy, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return energy.pass_with(flat, False)


def _onednn_pass(energy: MLPEnergy, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return energy.pass_with(flat, True)


def _fixed_pass(energy: MLPEnergy, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The rule before measurement: oneDNN from 256 rows where usable."""
    return energy.pass_with(flat, _use_onednn(flat))


IMPLS: dict[str, Pass] = {"torch": _torch_pass, "onednn": _onednn_pass}
_BY_NAME: dict[str, Pass] = {**IMPLS, **{f"{n}@1": routes.on_threads(f, 1)
                                         for n, f in IMPLS.items()}}
_UNWATCHED = {"torch": routes.Chosen("torch", _BY_NAME),
              "fixed": routes.Chosen("fixed", {"fixed": _fixed_pass})}
_WORKS: dict[tuple[str, torch.dtype], bool] = {}


def route_works(route: str, dtype: torch.dtype = torch.float32) -> bool:
    """The float64 cross-check, once per route and dtype: the pass of a small seeded network
    (3 → 16 → 16 → 1, 300 rows) agrees with float64 autograd to the dtype's rounding."""
    if (route, dtype) not in _WORKS:
        g = torch.Generator().manual_seed(0)
        with torch.random.fork_rng(devices=[]):  # the caller's global stream is untouched
            torch.manual_seed(0)
            net = MLPEnergy(3, 16, 2)
        x = torch.randn(300, 3, generator=g)
        with torch.enable_grad():  # the pass runs under no_grad; the reference needs autograd
            xd = x.double().requires_grad_(True)
            e_ref = torch.func.functional_call(
                net, {k: v.double() for k, v in net.state_dict().items()}, (xd,))
            (g_ref,) = torch.autograd.grad(e_ref.sum(), xd)
        tol = 1e-4 if dtype == torch.float32 else 1e-10
        try:
            net = net.to(dtype)
            e, grad = IMPLS[route](net, x.to(dtype))
            scale = g_ref.abs().max().item()
            ok = (e.dtype == dtype
                  and torch.allclose(e.double(), e_ref.detach(), rtol=tol, atol=tol)
                  and torch.allclose(grad.double(), g_ref, rtol=tol, atol=tol * scale))
        except Exception:  # a private op may fail in any way: then it is not a route here
            ok = False
        _WORKS[(route, dtype)] = bool(ok)
    return _WORKS[(route, dtype)]


def candidates(flat: torch.Tensor) -> dict[str, Pass]:
    """The routes that apply to ``flat`` and passed :func:`route_works`, at the current
    thread count and (with more than one thread) at one."""
    n = torch.get_num_threads()
    out: dict[str, Pass] = {}
    for route in ROUTES:
        if route == "onednn" and not onednn_usable(flat):
            continue
        if route_works(route, flat.dtype):
            out[route] = _BY_NAME[route]
            if n > 1:
                out[f"{route}@1"] = _BY_NAME[f"{route}@1"]
    return out


def route_key(energy: MLPEnergy, flat: torch.Tensor) -> str:
    """``mlp|dtype|threads=N|rows=B|in x hidden... `` (rows in power-of-two buckets)."""
    widths = "x".join(str(m.in_features) for m in energy.net if isinstance(m, nn.Linear))
    return (f"{FAMILY}|{str(flat.dtype).removeprefix('torch.')}|"
            f"threads={torch.get_num_threads()}|rows={routes.bucket(flat.shape[0])}|{widths}")


def route_for(energy: MLPEnergy, flat: torch.Tensor) -> routes.Chosen:
    """The pass ``(energy, flat) -> (E, ∇E)`` for these rows: pinned, measured at the first
    pass of a shape (then memoised in :data:`shortrun.routes.MEMO`), or the fixed rule off CPU
    and for dtypes other than float32/float64."""
    widths = tuple(m.in_features for m in energy.net if isinstance(m, nn.Linear))
    memo_key = (FAMILY, flat.dtype, flat.device.type, routes.bucket(flat.shape[0]), widths,
                torch.get_num_threads(), torch.backends.mkldnn.enabled)
    chosen = routes.MEMO.get(memo_key)
    if chosen is None:
        chosen = routes.MEMO[memo_key] = _first_route(energy, flat)
    return chosen


def _first_route(energy: MLPEnergy, flat: torch.Tensor) -> routes.Chosen:
    pinned = routes.pinned_route(FAMILY, ROUTES)
    if pinned == "torch":
        return _UNWATCHED["torch"]
    if (pinned is not None or flat.device.type != "cpu"
            or flat.dtype not in (torch.float32, torch.float64)):
        return _UNWATCHED["fixed"]  # the onednn pin, another family's pin, off CPU
    cands = candidates(flat)
    if not cands:
        return _UNWATCHED["fixed"]
    return routes.choose_route(route_key(energy, flat), cands, energy, flat)
