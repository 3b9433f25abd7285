"""Progress without a terminal: under nohup, CI or a batch scheduler tqdm draws nothing, so the
loop prints a line every ``train.progress_every_s`` seconds instead."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path


def metric_rows(run_dir: Path) -> list[dict]:
    """Rows of ``metrics.jsonl``; a torn last line (a killed run) is skipped."""
    path = run_dir / "metrics.jsonl"
    rows = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


class ProgressLines:
    """A progress line on stderr every ``every_s`` seconds, for logs without a terminal."""

    def __init__(self, start_step: int, every_s: float) -> None:
        self.start_step, self.every_s = start_step, every_s
        self.start = self.last = time.monotonic()

    def maybe_print(self, step: int, total: int, metrics: dict[str, float]) -> None:
        now = time.monotonic()
        if now - self.last < self.every_s:
            return
        self.last = now
        rate = (step - self.start_step) / max(now - self.start, 1e-9)
        eta = (total - step) / rate if rate > 0 else float("inf")
        shown = " ".join(f"{k}={v:.4g}" for k, v in list(metrics.items())[:4])
        print(f"step {step}/{total} ({100 * step / total:.0f}%) {rate:.3g} steps/s "
              f"eta {_duration(eta)} {shown}".rstrip(), file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"
