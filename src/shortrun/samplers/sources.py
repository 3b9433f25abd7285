"""Chain sources: where a chain starts and what persists between parameter updates.

Every source has ``start(n, data=None, generator=None) -> x`` and ``finish(x)``. Stateful ones
are ``nn.Module`` s whose state lives in registered buffers, so it is saved in checkpoints with
the model and restored on ``--resume``.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn


class ChainSource(Protocol):
    def start(self, n: int, data: torch.Tensor | None = None,
              generator: torch.Generator | None = None) -> torch.Tensor: ...

    def finish(self, x: torch.Tensor) -> None: ...


class NoiseSource:
    """Fresh chains from uniform noise on ``[low, high]`` or from ``N(0, std²I)``."""

    def __init__(self, shape: tuple[int, ...], kind: str = "uniform", low: float = -1.0,
                 high: float = 1.0, std: float = 1.0) -> None:
        if kind not in ("uniform", "normal"):
            raise ValueError(f"noise kind must be 'uniform' or 'normal'; got {kind!r}")
        self.shape, self.kind, self.low, self.high, self.std = tuple(shape), kind, low, high, std

    def start(self, n: int, data: torch.Tensor | None = None,
              generator: torch.Generator | None = None,
              device: torch.device | str = "cpu") -> torch.Tensor:
        if self.kind == "uniform":
            u = torch.rand((n, *self.shape), generator=generator, device=device)
            return self.low + (self.high - self.low) * u
        return self.std * torch.randn((n, *self.shape), generator=generator, device=device)

    def finish(self, x: torch.Tensor) -> None:
        return None


class DataSource:
    """Chains started at the data batch: contrastive divergence (Hinton 2002)."""

    def start(self, n: int, data: torch.Tensor | None = None,
              generator: torch.Generator | None = None) -> torch.Tensor:
        if data is None:
            raise ValueError("DataSource.start needs the data batch")
        return data[:n].detach().clone()

    def finish(self, x: torch.Tensor) -> None:
        return None


class PersistentChains(nn.Module):
    """Persistent chains (PCD, Tieleman 2008): never reset, carried across updates.

    ``start(n)`` hands out the next ``n`` chains in rotation, so more chains than the batch is
    allowed; ``finish`` writes them back.
    """

    def __init__(self, n_chains: int, init: torch.Tensor) -> None:
        super().__init__()
        if init.shape[0] != n_chains:
            raise ValueError(f"init has {init.shape[0]} states for {n_chains} chains")
        self.register_buffer("chains", init.detach().clone())
        self.register_buffer("cursor", torch.zeros((), dtype=torch.long))
        self._idx: torch.Tensor | None = None

    def start(self, n: int, data: torch.Tensor | None = None,
              generator: torch.Generator | None = None) -> torch.Tensor:
        total = self.chains.shape[0]
        if n > total:
            raise ValueError(f"asked for {n} chains but only {total} persist")
        begin = int(self.cursor)
        self._idx = (torch.arange(begin, begin + n) % total).to(self.chains.device)
        self.cursor.fill_((begin + n) % total)
        return self.chains[self._idx].clone()

    def finish(self, x: torch.Tensor) -> None:
        if self._idx is None:
            raise RuntimeError("PersistentChains.finish called before start")
        self.chains[self._idx] = x.detach().to(self.chains.dtype)
        self._idx = None


class ReplayBuffer(nn.Module):
    """Replay buffer of past negatives (Du & Mordatch 2019, IGEBM §3.1).

    ``start(n)`` draws ``n`` stored samples and re-initialises a fraction ``reinit`` of them from
    ``noise``; ``finish(x)`` writes the chains' end states back where they came from. The buffer
    starts full of noise, which is the same as the paper's 'empty buffer → noise' start.
    """

    def __init__(self, capacity: int, noise: NoiseSource, reinit: float = 0.05) -> None:
        super().__init__()
        if capacity <= 0:
            raise ValueError(f"replay buffer capacity must be > 0; got {capacity}")
        if not 0.0 <= reinit <= 1.0:
            raise ValueError(f"replay buffer reinit fraction must be in [0, 1]; got {reinit}")
        self.noise, self.reinit = noise, reinit
        self.register_buffer("store", torch.zeros((capacity, *noise.shape)))
        self.register_buffer("filled", torch.zeros((), dtype=torch.bool))
        self._idx: torch.Tensor | None = None

    def start(self, n: int, data: torch.Tensor | None = None,
              generator: torch.Generator | None = None) -> torch.Tensor:
        capacity = self.store.shape[0]
        if not bool(self.filled):
            self.store.copy_(self.noise.start(capacity, generator=generator))
            self.filled.fill_(True)
        idx = torch.randint(capacity, (n,), generator=generator)
        x = self.store[idx.to(self.store.device)].clone()
        fresh = torch.rand(n, generator=generator) < self.reinit
        if fresh.any():
            x[fresh.to(x.device)] = self.noise.start(int(fresh.sum()), generator=generator).to(x)
        self._idx = idx.to(self.store.device)
        return x

    def finish(self, x: torch.Tensor) -> None:
        if self._idx is None:
            raise RuntimeError("ReplayBuffer.finish called before start")
        self.store[self._idx] = x.detach().to(self.store.dtype)
        self._idx = None
