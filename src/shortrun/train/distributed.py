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
import time
import weakref
from dataclasses import dataclass

import torch
import torch.distributed as dist

from shortrun.collectives import (  # noqa: F401  (re-exported for the Trainer)
    all_mean_,
    average_gradients_before_step,
    average_gradients_now,
)
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


def shutdown(info: DistInfo, timeout_s: float = 30.0) -> None:
    """Leave the process group once gloo's worker threads hold no Python tensor.

    Why the wait: once any ``torch.optim`` step has imported torch's dynamo compiler, the gloo
    process group outlives ``destroy_process_group`` (torch 2.13), so its worker threads are
    still there when the interpreter finalizes. A worker marks a collective complete *before*
    it drops its reference to the work, whose tensors are Python objects; if finalization
    starts in that window, the worker's decref asks for the GIL, is told to exit, and the rank
    aborts ("terminate called without an active exception") after a run that finished and
    saved. Seen in 1 of 4-16 two-rank runs on 2 loaded cores; core dump:
    ``ProcessGroupGloo::runLoop`` → ``~AsyncAllreduceWork`` → ``decref_pyobject`` inside
    ``Py_FinalizeEx`` (pytorch/pytorch#179291 describes the same crash). A barrier does not
    help: its work keeps the earlier works alive and frees them on the worker thread too.

    So the last collective is a sentinel all-reduce: every earlier collective has completed
    on every rank once it returns, and the main thread then sleeps (the GIL free) until the
    worker has released the sentinel, which it does after the works before it.
    """
    if not (info.enabled and dist.is_initialized()):
        return
    sentinel = torch.zeros(1)
    dist.all_reduce(sentinel)
    released = weakref.ref(sentinel)
    del sentinel
    deadline = time.monotonic() + timeout_s
    while released() is not None and time.monotonic() < deadline:
        time.sleep(0.001)
    dist.destroy_process_group()


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
