"""Threads chosen for the work: a run whose first step used only measured routes that chose
one thread runs on one thread.

The routes (:mod:`shortrun.speed.engine`) time each hot product at torch's thread count and at one,
and a second thread must win by :data:`~shortrun.speed.engine.THREAD_MARGIN`. When every route the
first step of a run used (:data:`shortrun.speed.engine.MEMO`) was measured and chose one thread
(``rbm_digits``: its 100×64×20 products, or its NumPy step on a one-thread BLAS), the step's
remaining work (batch gathering, element-wise ops, sampling) is as small, and each parallel
region costs a thread wake-up: a scheduler slice on a loaded machine (figures: bench/README,
"Measurements behind the speed layer"). So the rest of the run takes one thread, and the count
is restored when training ends. ``train.threads`` set by the user is never overridden; nor is
a run with pinned routes (nothing measured).
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
        """Drop to one thread if every route the step called was measured and chose one
        thread (a pinned or fixed route was not measured: then nothing changes); True if
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
