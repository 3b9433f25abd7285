"""What the scikit-learn estimators share: torch dtype and device from their options, the
random state as a torch seed, and the lean training loop.

The loop calls the model's own ``training_step`` (the one update rule the Trainer runs too)
with the optimiser the model builds, and nothing else per step: no logging, checkpoints,
pictures or divergence guard, which a scikit-learn ``fit`` does not have either. Like the
Trainer it drops to one thread when the first step's measured routes chose one
(:class:`~shortrun.train.threads.ThreadsForTheWork`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch

from shortrun.train.threads import ThreadsForTheWork

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def torch_dtype(name: Any, owner: str) -> torch.dtype:
    """``dtype=`` of an estimator: "float32", "float64" or the NumPy / torch dtype."""
    key = name if isinstance(name, str) else str(np.dtype(name)) if not isinstance(
        name, torch.dtype) else str(name).removeprefix("torch.")
    if key not in DTYPES:
        raise ValueError(f"{owner}: dtype must be 'float32' or 'float64'; got {name!r}")
    return DTYPES[key]


def torch_device(name: Any, owner: str) -> torch.device:
    """``device=`` of an estimator: "cpu", "cuda", "cuda:1", ... or a ``torch.device``."""
    try:
        return torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"{owner}: device must name a torch device ('cpu', 'cuda', "
                         f"'cuda:0'); got {name!r}") from None


@contextlib.contextmanager
def seeded(rng: np.random.RandomState) -> Iterator[None]:
    """torch's global RNG (the chains draw from it) seeded from ``rng`` inside the block and
    restored after, so ``random_state`` makes a fit repeatable and leaves the caller's torch
    stream alone."""
    seed = int(rng.randint(0, 2**31 - 1))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """torch's default dtype set to ``dtype`` inside the block: the EBM's chain sources draw
    their noise in the default dtype, so a float64 energy needs float64 chains."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def train_steps(model: Any, optimizer: Any, batches: Iterable[torch.Tensor],
                first_step: int = 0) -> int:
    """Run ``model.training_step`` on each batch in order; returns the next step number."""
    threads = ThreadsForTheWork(None)
    optimizers = {"main": optimizer}
    step = first_step
    try:
        for batch in batches:
            model.training_step(batch, step, optimizers)
            if step == first_step:
                threads.after_first_step()
            step += 1
    finally:
        threads.restore()
    return step


def even_slices(n: int, batch_size: int) -> list[slice]:
    """Consecutive batches of ``batch_size`` rows over ``n`` rows, the last one shorter: the
    order in which scikit-learn's BernoulliRBM visits its data (no shuffling)."""
    return [slice(i, min(i + batch_size, n)) for i in range(0, n, batch_size)]
