"""The one chunked sampler: ``n`` samples drawn ``batch_size`` at a time, gathered on the CPU.

Used by ``shortrun sample`` and by every metric that needs model samples (FD/KID, MMD, the
Dual-MCMC generator/revised pairs, the text perplexities), so chunking, detaching and the move
to the CPU are written once. Not under ``no_grad``: Langevin samplers differentiate the energy
with respect to the chain state (the samplers manage their own grad mode).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

from shortrun.errors import ConfigError

Drawn = TypeVar("Drawn", torch.Tensor, tuple[torch.Tensor, ...])


def sample_in_chunks(draw: Callable[[int], Drawn], n: int, batch_size: int,
                     tick: Callable[[int], None] | None = None) -> Drawn:
    """Call ``draw(k)`` for ``k = batch_size, …, batch_size, rest`` (summing to ``n``).

    ``draw`` returns a tensor, or a tuple of tensors drawn together (e.g. a sample and its
    revision); each is detached, moved to the CPU and concatenated along dim 0. ``tick(k)`` is
    called after each chunk (progress)."""
    if n <= 0 or batch_size <= 0:
        raise ConfigError(f"sampling needs n > 0 and batch_size > 0; got n={n}, "
                          f"batch_size={batch_size}")
    chunks = []
    for start in range(0, n, batch_size):
        k = min(batch_size, n - start)
        got = draw(k)
        if isinstance(got, tuple):
            chunks.append(tuple(t.detach().cpu() for t in got))
        else:
            chunks.append(got.detach().cpu())
        if tick is not None:
            tick(k)
    if isinstance(chunks[0], tuple):
        return tuple(torch.cat(parts) for parts in zip(*chunks, strict=True))
    return torch.cat(chunks)
