"""Deterministic, resumable batch order over an in-memory dataset.

The batch at global step ``t`` is a function of ``(seed, t)`` alone: epoch ``e = t // S`` uses
the permutation drawn from a generator seeded with ``(seed, e)``. Resuming at step ``t``
therefore needs no loader state, which is what makes N straight steps and N/2 + resume + N/2
bit-identical.
"""

from __future__ import annotations

import numpy as np
import torch

from shortrun.errors import ConfigError

# dtypes NumPy holds; bf16 and the like take torch's indexing
_NUMPY_DTYPES = {torch.float16, torch.float32, torch.float64, torch.uint8, torch.int8,
                 torch.int16, torch.int32, torch.int64, torch.bool}


def gather_rows(data: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``data[idx]`` for a minibatch, bit-identical, by NumPy for a CPU tensor.

    Why not torch's indexing: a 100 × 784 gather is above torch's parallel grain size, so it wakes
    torch's OpenMP threads, which then spin for a while after the copy. Where the step that follows
    runs NumPy's multithreaded BLAS (the ``rbm_step`` route ``numpy``), the two thread pools fight
    over the cores and a CD-1 epoch of MNIST at 2 threads ran more than twice as long (bench/README,
    "Measurements behind the speed layer"). NumPy's ``take`` runs on the calling thread only.
    """
    if data.device.type != "cpu" or data.dtype not in _NUMPY_DTYPES or data.requires_grad:
        return data[idx]
    return torch.from_numpy(np.take(data.numpy(), idx.numpy(), axis=0))


class EpochBatcher:
    def __init__(self, n: int, batch_size: int, seed: int, rank: int = 0, world: int = 1):
        if n < batch_size * world:
            raise ConfigError(f"train.batch_size: {batch_size} is larger than the training set "
                              f"({n} examples per {world} process(es)); lower it")
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.rank, self.world = rank, world
        self.steps_per_epoch = n // (batch_size * world)
        self._epoch = -1
        self._perm: torch.Tensor | None = None

    def epoch_of(self, step: int) -> int:
        return step // self.steps_per_epoch

    def indices(self, step: int) -> torch.Tensor:
        epoch = self.epoch_of(step)
        if epoch != self._epoch:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._perm, self._epoch = torch.randperm(self.n, generator=g), epoch
        assert self._perm is not None
        pos = step % self.steps_per_epoch
        width = self.batch_size * self.world
        block = self._perm[pos * width : (pos + 1) * width]
        return block[self.rank * self.batch_size : (self.rank + 1) * self.batch_size]
