"""The ``mlp`` family: the products of the MLP energy's fast pass
(:meth:`shortrun.energies.mlp.MLPEnergy.energy_and_grad`) by ``torch`` (``F.linear``) or
``onednn`` (:mod:`shortrun.speed.onednn`), each at the run's threads and at one.

Which wins depends on the CPU and the row count (bench/README.md, "Route gains per family"),
so the engine races them per row bucket. The ``onednn`` pin, like ``train.routes: fixed``,
takes the fixed rule (oneDNN from 256 rows). The energy is duck-typed (``net`` and
``pass_with(flat, onednn)``).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from shortrun.speed import engine
from shortrun.speed.onednn import onednn_usable

FAMILY = "mlp"


def _use_onednn(x: torch.Tensor) -> bool:
    # Below a few hundred rows oneDNN's per-call set-up costs more than it saves.
    return x.shape[0] >= 256 and onednn_usable(x)


def _widths(energy: nn.Module) -> tuple[int, ...]:
    return tuple(m.in_features for m in energy.net if isinstance(m, nn.Linear))


class MLPPass(engine.Family):
    """``(energy, flat) -> (E, ∇E)`` by torch or oneDNN products (module docstring)."""

    name, routes = FAMILY, engine.FAMILIES[FAMILY]
    impls = {**engine.with_one_thread({"torch": lambda e, x: e.pass_with(x, False),
                                       "onednn": lambda e, x: e.pass_with(x, True)}),
             "fixed": lambda e, x: e.pass_with(x, _use_onednn(x))}
    pin_as = {"onednn": "fixed"}

    def candidates(self, energy, flat) -> list[str]:
        names = ["torch", "onednn"] if onednn_usable(flat) else ["torch"]
        return names + ([f"{n}@1" for n in names] if torch.get_num_threads() > 1 else [])

    def fixed(self, energy, flat) -> str:
        return "fixed"

    def key(self, energy, flat) -> str | None:
        if flat.device.type != "cpu" or flat.dtype not in (torch.float32, torch.float64):
            return None
        widths = "x".join(map(str, _widths(energy)))
        return (f"{FAMILY}|{str(flat.dtype).removeprefix('torch.')}|"
                f"threads={torch.get_num_threads()}|rows={engine.bucket(flat.shape[0])}|{widths}")

    def check_key(self, route, energy, flat):
        return flat.dtype, _widths(energy)

    def cross_check(self, route, energy, flat) -> bool:
        """The pass of a copy of ``energy`` on 300 seeded rows agrees with float64 autograd
        to the dtype's rounding."""
        dtype = flat.dtype
        x = torch.randn(300, flat.shape[1], generator=torch.Generator().manual_seed(0))
        ref_net = copy.deepcopy(energy).double()
        with torch.enable_grad():  # the pass runs under no_grad; the reference needs autograd
            xd = x.double().requires_grad_(True)
            e_ref = ref_net(xd)
            (g_ref,) = torch.autograd.grad(e_ref.sum(), xd)
        tol = 1e-4 if dtype == torch.float32 else 1e-10
        e, grad = self.impls[route](ref_net.to(dtype), x.to(dtype))
        scale = g_ref.abs().max().item()
        return (e.dtype == dtype
                and torch.allclose(e.double(), e_ref.detach(), rtol=tol,
                                   atol=tol * max(1.0, e_ref.abs().max().item()))
                and torch.allclose(grad.double(), g_ref, rtol=tol, atol=tol * scale))


MLP_PASS = MLPPass()


def route_for(energy: nn.Module, flat: torch.Tensor) -> engine.Chosen:
    """The pass ``(energy, flat) -> (E, ∇E)`` for these rows: pinned, measured at the first
    pass of a shape (then memoised), or the fixed rule off CPU."""
    memo_key = (FAMILY, flat.dtype, flat.device.type, engine.bucket(flat.shape[0]),
                _widths(energy), torch.get_num_threads(), torch.backends.mkldnn.enabled)
    return engine.route(MLP_PASS, memo_key, energy, flat)
