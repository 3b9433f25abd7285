"""Stopping a run cleanly: SIGINT/SIGTERM end training at a step boundary with a checkpoint."""

from __future__ import annotations

import signal
import threading


class StopSignals:
    """SIGINT/SIGTERM during ``fit`` finish the current step, then stop with a checkpoint.

    The first signal only sets :attr:`signum`; the loop saves at the next step boundary, where
    the state is that of a whole number of steps (so a resume is bit-identical). A second
    signal raises ``KeyboardInterrupt`` at once. Installed only in the main thread of a
    single-process run: ranks stopping at different steps would block in the save's gather.
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.signum: int | None = None
        self._before: dict[int, object] = {}

    def _handle(self, signum, frame) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum

    def install(self) -> None:
        if self.enabled:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._before[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._before.items():
            signal.signal(sig, handler)
        self._before.clear()
