"""Progress of ``shortrun eval``: a tqdm bar on a terminal, a log line every so often elsewhere.

A batch scheduler, ``nohup`` or CI has no terminal, and a bar there is either invisible or a
wall of carriage returns; so without a TTY each running task prints one plain line at most every
``every_s`` seconds, and a metric group that ran that long says when it is done.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from tqdm import tqdm

#: Called with the number of items just finished.
Tick = Callable[[int], None]


def _no_tick(n: int) -> None:
    """A task nobody watches."""


class Progress:
    """Where eval progress goes. ``tty=None`` asks the stream; ``enabled=False`` is silent."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None,
                 every_s: float = 30.0, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self.every_s, self.enabled, self.clock = every_s, enabled, clock
        self.group_name = ""
        self._last_line = clock()

    @classmethod
    def off(cls) -> Progress:
        return cls(enabled=False)

    def log(self, text: str) -> None:
        print(f"eval: {text}", file=self.stream, flush=True)
        self._last_line = self.clock()

    @contextmanager
    def group(self, name: str) -> Iterator[None]:
        """One metric group; without a TTY a group that ran ``every_s`` or more says so."""
        self.group_name, start = name, self.clock()
        self._last_line = start
        yield
        took = self.clock() - start
        if self.enabled and not self.tty and took >= self.every_s:
            self.log(f"{name} done in {took:.0f} s")

    @contextmanager
    def task(self, desc: str, total: int | None = None, unit: str = "it") -> Iterator[Tick]:
        """A counted task inside the current group; call the yielded tick with each batch."""
        label = f"{self.group_name}: {desc}" if self.group_name else desc
        if not self.enabled:
            yield _no_tick
        elif self.tty:
            bar = tqdm(total=total, desc=label, unit=unit, leave=False, file=self.stream,
                       dynamic_ncols=True)
            try:
                yield bar.update
            finally:
                bar.close()
        else:
            done = 0
            of = f"/{total}" if total else ""

            def tick(n: int) -> None:
                nonlocal done
                done += n
                if self.clock() - self._last_line >= self.every_s:
                    share = f" ({100 * done // total}%)" if total else ""
                    self.log(f"{label} {done}{of} {unit}{share}")

            yield tick
