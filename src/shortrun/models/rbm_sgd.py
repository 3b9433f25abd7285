"""The RBMs' optimiser: SGD with momentum and weight decay, and its learning-rate decay.

Why not ``torch.optim.SGD``: every ``torch.optim`` optimiser's constructor imports torch's
compiler stack (``Optimizer.add_param_group`` is wrapped to disable it), which costs more
than scikit-learn's whole ``BernoulliRBM.fit`` on digits (bench/README.md). An RBM's update
is closed form (Hinton 2002, Eq. 5) and needs none of what that buys.

:class:`RBMSGD` computes torch's SGD update call for call (``torch.optim.SGD`` with
``foreach``: on the CPU its list kernels apply the same per-tensor ``add``/``mul_``/``add_``),
so a run gives the same bits either way; ``numpy_form`` tells the NumPy step
(:func:`shortrun.speed.rbm_numpy.numpy_sgd`) that it may compute the same update on the
tensors' memory. Its ``state_dict`` is
SGD's (``state`` by parameter index, ``param_groups`` with the indices), so checkpoints written
with ``torch.optim.SGD`` load. :class:`ExponentialDecay` is the Trainer's ``train.lr_decay``
schedule for it, with ``torch.optim.lr_scheduler.ExponentialLR``'s arithmetic and state-dict
keys.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import torch

# SGD options a group carries (torch's names, so a saved SGD state dict reads back)
_DEFAULTS = {"lr": 1e-3, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0,
             "nesterov": False, "maximize": False, "foreach": None, "differentiable": False,
             "fused": None}

Hook = Callable[[Any, tuple, dict], None]


class RBMSGD:
    """``RBMSGD(params_or_groups, lr=..., momentum=0, weight_decay=0)``: plain SGD,
    ``g ← ∇ + λθ; m ← μm + g (m = g at the first step); θ ← θ − lr·m``, as torch's SGD
    without dampening, Nesterov or maximize (refused: the RBMs never ask for them)."""

    numpy_form = True  # plain SGD: the NumPy step may compute the update (without hooks)

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0,
                 weight_decay: float = 0.0, **options: Any) -> None:
        unknown = set(options) - set(_DEFAULTS)
        if unknown:
            raise TypeError(f"RBMSGD: unknown option(s) {sorted(unknown)}")
        for key in ("dampening", "nesterov", "maximize"):
            if options.get(key):
                raise ValueError(f"RBMSGD: {key} is not supported (plain or momentum SGD only)")
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"RBMSGD: lr, momentum and weight_decay must be >= 0; got "
                             f"{lr}, {momentum}, {weight_decay}")
        self.defaults = {**_DEFAULTS, **options, "lr": lr, "momentum": momentum,
                         "weight_decay": weight_decay}
        self.state: defaultdict[torch.Tensor, dict] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        self._pre_hooks: dict[int, Hook] = {}
        self._post_hooks: dict[int, Hook] = {}
        params = list(params)
        if params and not isinstance(params[0], dict):
            params = [{"params": params}]
        for group in params:
            self.add_param_group(group)

    def add_param_group(self, group: dict[str, Any]) -> None:
        ps = group["params"]
        ps = [ps] if isinstance(ps, torch.Tensor) else list(ps)
        self.param_groups.append({**self.defaults, **group, "params": ps})

    # ------------------------------------------------------------------ hooks
    def register_step_pre_hook(self, hook: Hook) -> Any:
        """``hook(optimizer, args, kwargs)`` before every step (data-parallel averaging)."""
        return _Handle(self._pre_hooks, hook)

    def register_step_post_hook(self, hook: Hook) -> Any:
        return _Handle(self._post_hooks, hook)

    @property
    def hooked(self) -> bool:
        """Whether a step hook is registered (then every update runs :meth:`step`)."""
        return bool(self._pre_hooks or self._post_hooks)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.zero_()

    # ------------------------------------------------------------------ the update
    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update by torch calls: those of ``torch.optim.SGD(foreach=True)`` on the CPU."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._run(self._pre_hooks)
        for group in self.param_groups:
            lr, momentum, decay = group["lr"], group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                if decay:
                    g = g.add(p, alpha=decay)
                if momentum:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = g.detach().clone()
                    else:
                        buf.mul_(momentum).add_(g, alpha=1.0)
                    g = buf
                p.add_(g, alpha=-lr)
        self._run(self._post_hooks)
        return loss

    def _run(self, hooks: dict[int, Hook]) -> None:
        for hook in list(hooks.values()):
            hook(self, (), {})

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """SGD's layout: ``state`` keyed by the parameter's index over all groups."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            ids = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": ids})
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """A state dict of this class or of ``torch.optim.SGD`` with the same groups."""
        saved = state_dict["param_groups"]
        if [len(s["params"]) for s in saved] != [len(g["params"]) for g in self.param_groups]:
            raise ValueError("loaded state dict has a different number of parameter groups "
                             "or parameters than the optimizer")
        by_index = {}
        for s, g in zip(saved, self.param_groups, strict=True):
            by_index.update(zip(s["params"], g["params"], strict=True))
            g.update({k: v for k, v in s.items() if k != "params"})
        self.state = defaultdict(dict)
        for i, s in state_dict["state"].items():
            p = by_index[int(i)]
            # copies, as torch's load does: the saved dict may hold another optimiser's buffers
            self.state[p] = {k: v.to(dtype=p.dtype, device=p.device, copy=True)
                             if isinstance(v, torch.Tensor) else v for k, v in s.items()}


class _Handle:
    _next = 0

    def __init__(self, hooks: dict[int, Hook], hook: Hook) -> None:
        _Handle._next += 1
        self.id, self.hooks = _Handle._next, hooks
        hooks[self.id] = hook

    def remove(self) -> None:
        self.hooks.pop(self.id, None)


class ExponentialDecay:
    """``lr ← lr·γ`` per call of :meth:`step` (the Trainer's epoch boundary), the arithmetic
    of ``torch.optim.lr_scheduler.ExponentialLR`` (each group's current lr times γ, so the same
    floats) for optimisers that are not ``torch.optim`` subclasses. State-dict keys as
    ExponentialLR's (``last_epoch``, ``base_lrs``, ``gamma``), so either reads the other's."""

    def __init__(self, optimizer: Any, gamma: float) -> None:
        self.optimizer, self.gamma = optimizer, gamma
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = 0

    def step(self) -> None:
        self.last_epoch += 1
        for group in self.optimizer.param_groups:
            group["lr"] = group["lr"] * self.gamma

    def get_last_lr(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        return {"gamma": self.gamma, "base_lrs": list(self.base_lrs),
                "last_epoch": self.last_epoch, "_last_lr": self.get_last_lr()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.gamma = state.get("gamma", self.gamma)
        self.base_lrs = list(state.get("base_lrs", self.base_lrs))
        self.last_epoch = int(state.get("last_epoch", self.last_epoch))


def lr_decay(optimizer: Any, gamma: float) -> Any:
    """``train.lr_decay``'s schedule of ``optimizer``: torch's ``ExponentialLR`` for a
    ``torch.optim`` optimiser, else :class:`ExponentialDecay`."""
    if isinstance(optimizer, torch.optim.Optimizer):
        return torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=gamma)
    return ExponentialDecay(optimizer, gamma)
