"""Collectives a model may call from inside its update, in a single process or under torchrun.

The Trainer (:mod:`shortrun.train.distributed`) registers :func:`average_gradients_before_step`
on every optimiser it builds; models call :func:`average_gradients_now` before clipping and
:func:`all_mean_` for state they move outside their optimisers. All three are no-ops in a
single process, so a model written against them runs unchanged with or without torchrun.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

_AVERAGE = "_shortrun_average_gradients"
_AVERAGED = "_shortrun_gradients_averaged"


def average_gradients_before_step(optimizer: torch.optim.Optimizer, world: int) -> None:
    """Register a pre-step hook that all-reduces (averages) every gradient of ``optimizer``,
    unless :func:`average_gradients_now` already did since the last step."""

    def average() -> None:
        grads = [p.grad for g in optimizer.param_groups for p in g["params"]
                 if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= world
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def hook(opt: torch.optim.Optimizer, args, kwargs) -> None:
        if getattr(opt, _AVERAGED, False):
            setattr(opt, _AVERAGED, False)
            return
        average()

    setattr(optimizer, _AVERAGE, average)
    optimizer.register_step_pre_hook(hook)


def average_gradients_now(optimizer: torch.optim.Optimizer) -> None:
    """Average ``optimizer``'s gradients over the ranks now rather than in its next ``step()``
    (which then leaves them alone): ``Model.optimizer_step`` calls it before clipping the
    gradient norm, so the clip sees the averaged gradient, as under DDP. A no-op for an
    optimiser the Trainer did not register (a single process)."""
    average = getattr(optimizer, _AVERAGE, None)
    if average is not None:
        average()
        setattr(optimizer, _AVERAGED, True)


def all_mean_(tensor: torch.Tensor) -> torch.Tensor:
    """Average ``tensor`` in place over the ranks of the running process group; a no-op in a
    single process. For state a model updates outside its optimisers from its own batch slice
    (the centred RBM's offsets), so that every rank applies the global batch's statistics."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(tensor)
        tensor /= dist.get_world_size()
    return tensor
