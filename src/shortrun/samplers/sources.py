"""Chain sources: where a chain starts and what persists between parameter updates.

Every source has ``start(n, data=None, generator=None) -> x`` and ``finish(x)``; ``x`` is a
batch of states, or the state a kernel works on (the RBM's CD hands over its positive-phase
:class:`~shortrun.samplers.gibbs.GibbsState`; parallel tempering's state holds every replica).
Stateful sources are ``nn.Module`` s whose state lives in registered buffers, so it is saved in
checkpoints with the model and restored on ``--resume``.

Every MCMC-trained model draws its negatives from one of these: the data-space EBM (noise,
replay buffer, a rotating pool of persistent chains, data) and the RBMs (data for CD-k,
persistent chains that all advance every update for PCD/FPCD, tempered replicas for PT).
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from shortrun.samplers.tempering import SwapInfo, TemperingState


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
    """Chains started at the data batch: contrastive divergence (Hinton 2002).

    ``data`` is the batch itself (a copy of its first ``n`` rows is returned), or a kernel
    state already computed at the batch, a NamedTuple of per-chain tensors (returned cut to
    ``n`` rows, not copied: kernels never write into their input state), so that CD reuses
    what the positive phase computed there."""

    def start(self, n: int, data: torch.Tensor | tuple | None = None,
              generator: torch.Generator | None = None) -> torch.Tensor | tuple:
        if data is None:
            raise ValueError("DataSource.start needs the data batch")
        if isinstance(data, torch.Tensor):
            return data[:n].detach().clone()
        return type(data)(*(t if len(t) == n else t[:n] for t in data))

    def finish(self, x: torch.Tensor) -> None:
        return None


class PersistentChains(nn.Module):
    """Persistent chains (PCD, Tieleman 2008): never reset, carried across updates. Two uses:

    - ``rotating=True``, a **pool** (the data-space EBM's ``model.pool_size``): ``start(n)``
      hands out the next ``n`` chains in rotation, so the pool may be larger than the batch and
      the chains not handed out wait; a ``cursor`` buffer remembers where the rotation is.
    - ``rotating=False``, **all chains advance every update** (the RBMs' ``model.n_chains``,
      as in Tieleman 2008): ``start()`` returns every chain (the buffer itself, not a copy:
      kernels never write into their input) and ``finish(x)`` copies the end states in.
    """

    def __init__(self, n_chains: int, init: torch.Tensor, rotating: bool = True) -> None:
        super().__init__()
        if init.shape[0] != n_chains:
            raise ValueError(f"init has {init.shape[0]} states for {n_chains} chains")
        self.rotating = rotating
        self.register_buffer("chains", init.detach().clone())
        if rotating:
            self.register_buffer("cursor", torch.zeros((), dtype=torch.long))
        self._idx: torch.Tensor | None = None
        self._started = False

    def reset(self, init: torch.Tensor) -> None:
        """Put every chain at ``init`` (one state per chain)."""
        self.chains.copy_(init)

    def start(self, n: int | None = None, data: torch.Tensor | None = None,
              generator: torch.Generator | None = None) -> torch.Tensor:
        total = self.chains.shape[0]
        if not self.rotating:
            if n is not None and n != total:
                raise ValueError(f"asked for {n} chains, but all {total} persistent chains "
                                 "advance every update (rotating=False)")
            self._started = True
            return self.chains
        n = total if n is None else n
        if n > total:
            raise ValueError(f"asked for {n} chains but only {total} persist")
        begin = int(self.cursor)
        self._idx = (torch.arange(begin, begin + n) % total).to(self.chains.device)
        self.cursor.fill_((begin + n) % total)
        return self.chains[self._idx].clone()

    def finish(self, x: torch.Tensor) -> None:
        if not self.rotating:
            if not self._started:
                raise RuntimeError("PersistentChains.finish called before start")
            self.chains.copy_(x.detach())
            self._started = False
            return
        if self._idx is None:
            raise RuntimeError("PersistentChains.finish called before start")
        self.chains[self._idx] = x.detach().to(self.chains.dtype)
        self._idx = None


class TemperedChains(nn.Module):
    """Persistent parallel-tempering replicas: ``n_chains`` independent ladders over the
    inverse temperatures ``betas`` (``betas[0] = 1``, the model), for the kernels of
    :mod:`shortrun.samplers.tempering`. ``start()`` gives the :class:`TemperingState`,
    ``finish(state)`` keeps it, ``record(info)`` counts the swaps; all of it is in buffers."""

    def __init__(self, n_chains: int, n_visible: int, betas: torch.Tensor) -> None:
        super().__init__()
        betas = torch.as_tensor(betas, dtype=torch.float32)
        if betas.dim() != 1 or len(betas) < 2 or float(betas[0]) != 1.0:
            raise ValueError("betas must be a 1-D ladder of >= 2 values starting at 1.0")
        self.register_buffer("betas", betas)
        self.register_buffer("states", torch.zeros(len(betas), n_chains, n_visible))
        self.register_buffer("parity", torch.zeros((), dtype=torch.long))
        self.register_buffer("accepted", torch.zeros(len(betas) - 1, dtype=torch.float64))
        self.register_buffer("proposed", torch.zeros(len(betas) - 1, dtype=torch.float64))
        self.last_swap_rate = 0.0

    def reset(self, v: torch.Tensor) -> None:
        """Start every replica of chain ``i`` at ``v[i]``."""
        self.states.copy_(v.to(self.states).expand_as(self.states))

    def start(self, n: int | None = None, data: torch.Tensor | None = None,
              generator: torch.Generator | None = None) -> TemperingState:
        if n is not None and n != self.states.shape[1]:
            raise ValueError(f"asked for {n} chains, but all {self.states.shape[1]} tempered "
                             "chains advance every update")
        return TemperingState(self.states, int(self.parity))

    def finish(self, state: TemperingState) -> None:
        self.states.copy_(state.replicas)
        self.parity.fill_(state.parity)

    def record(self, info: SwapInfo) -> None:
        """Count the swaps one :func:`~shortrun.samplers.tempering.swap_step` proposed."""
        if len(info.pairs) == 0:
            return
        acc = info.is_accepted.double().sum(1)
        self.accepted[info.pairs] += acc
        self.proposed[info.pairs] += info.is_accepted.shape[1]
        self.last_swap_rate = info.rate

    def swap_rates(self) -> torch.Tensor:
        """Fraction of accepted swaps per neighbouring pair since the start."""
        return self.accepted / self.proposed.clamp_min(1)


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
