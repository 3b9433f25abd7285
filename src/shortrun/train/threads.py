"""Threads chosen for the work: a run whose first step used only decided routes that run on
one thread runs on one thread.

The ``rbm_step`` size rule (:mod:`shortrun.speed.rbm_step`) puts a small RBM's update on one
BLAS thread (``numpy@1``). When every route the first
step used (:data:`shortrun.speed.engine.MEMO`) was decided so (raced, cached, replayed or by a
size rule) and runs on one thread, the step's remaining work is as small, and each parallel
region costs a thread wake-up: a scheduler slice on a loaded machine. So the rest of the run
takes one thread, restored when training ends. ``train.threads`` set by the user is never
overridden; nor is a run with pinned or fixed routes (nothing decided).
"""

from __future__ import annotations

import torch

from shortrun.speed import engine as routes


class ThreadsForTheWork:
    """Watch which routes the first training step calls; then maybe drop to one thread."""

    def __init__(self, user_threads: int | None) -> None:
        self.before = torch.get_num_threads()
        self.active = not user_threads and self.before > 1
        self.calls = {id(c): c.calls for c in routes.MEMO.values()}
        self.dropped = False

    def after_first_step(self) -> bool:
        """Drop to one thread if every route the step called was decided by the engine and
        runs on one thread (a pinned or fixed route was not: then nothing changes); True if
        dropped."""
        if not self.active:
            return False
        self.active = False
        used = [c for c in set(routes.MEMO.values()) if c.calls > self.calls.get(id(c), 0)]
        if used and all(c.key is not None and routes.threads_of(c.name, self.before) == 1
                        for c in used):
            torch.set_num_threads(1)
            self.dropped = True
        return self.dropped

    def restore(self) -> None:
        if self.dropped:
            torch.set_num_threads(self.before)
            self.dropped = False
