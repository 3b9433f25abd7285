"""Data parallelism with ``torch.distributed``, switched on by torchrun's environment.

``torchrun --nproc_per_node=N -m shortrun train ...`` sets ``WORLD_SIZE``/``RANK``; the Trainer
then (1) gives every rank a distinct slice of each global batch (:class:`EpochBatcher`),
(2) averages gradients across ranks right before every ``optimizer.step()`` through a step
pre-hook — the same averaged gradient DistributedDataParallel computes, but also correct for
models that call their networks many times per update (Langevin chains) or write closed-form
gradients into ``.grad`` (RBMs), which DDP's forward-wrapper cannot see; with
``train.grad_clip`` ``Model.optimizer_step`` averages first (:func:`average_gradients_now`), so
the clip sees the averaged gradient — and (3) lets only rank 0 log, draw and write checkpoints.
Each rank keeps its own chains, replay-buffer shard, RNG stream and BatchNorm running
statistics; rank 0 gathers the buffers into the checkpoint as per-rank shards. State a model
moves outside its optimisers from its own batch slice goes through :func:`all_mean_` (the
global batch's statistics), so the parameters stay bit-identical on every rank.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from shortrun.errors import ConfigError


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world: int = 1

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_from_env(device: str) -> DistInfo:
    """Join the process group torchrun describes; a no-op for a single process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        backend = "nccl" if device.startswith("cuda") else "gloo"
        dist.init_process_group(backend=backend)
    return DistInfo(rank=dist.get_rank(), world=dist.get_world_size())


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()


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


def mean_metrics(metrics: dict[str, float], info: DistInfo) -> dict[str, float]:
    """Average scalar metrics over ranks, so every rank's divergence guard agrees."""
    if not info.enabled or not metrics:
        return metrics
    keys = sorted(metrics)
    t = torch.tensor([float(metrics[k]) for k in keys], dtype=torch.float64)
    dist.all_reduce(t)
    return {k: float(v) / info.world for k, v in zip(keys, t.tolist(), strict=True)}


def broadcast_parameters(module: torch.nn.Module) -> None:
    for tensor in list(module.parameters()):
        dist.broadcast(tensor.data, src=0)


def gather_objects(obj, info: DistInfo) -> list:
    if not info.enabled:
        return [obj]
    out: list = [None] * info.world
    dist.all_gather_object(out, obj)
    return out


def parameters_identical(module: torch.nn.Module, info: DistInfo) -> bool:
    """True when every rank holds bit-identical parameters (checked at the end of a run)."""
    if not info.enabled:
        return True
    flat = torch.cat([p.detach().reshape(-1).double() for p in module.parameters()])
    lo, hi = flat.clone(), flat.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    return bool(torch.equal(lo, hi))


def check_world(saved: int, info: DistInfo) -> None:
    if saved != info.world and info.world > 1:
        raise ConfigError(f"this checkpoint was written by {saved} process(es); resume it with "
                          f"torchrun --nproc_per_node={saved}, or in a single process (which "
                          f"keeps rank 0's chains)")
