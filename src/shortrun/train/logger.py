"""metrics.jsonl and TensorBoard, written by rank 0 only."""

from __future__ import annotations

import json
import math
import time
import warnings
from pathlib import Path

from shortrun.errors import MissingExtraError
from shortrun.extras import require


class MetricsLogger:
    def __init__(self, run_dir: Path | None, enabled: bool = True,
                 purge_step: int | None = None) -> None:
        """``purge_step``: on resume, TensorBoard drops events at steps ≥ it (logged after the
        checkpoint by the interrupted attempt), so no step shows twice. ``run_dir=None``: the
        rows stay in memory only (:attr:`rows`, kept either way)."""
        self.path = run_dir / "metrics.jsonl" if run_dir is not None else None
        self.enabled = enabled
        self.start = time.time()
        self.tb = None
        self.rows: list[dict] = []
        if enabled and run_dir is not None:
            self.tb = _summary_writer(run_dir / "tb", purge_step)

    def truncate_after(self, step: int) -> None:
        """On resume, drop lines logged after the checkpoint we resume from."""
        if not (self.enabled and self.path is not None and self.path.is_file()):
            return
        keep = []
        for line in self.path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line)
            except json.JSONDecodeError:
                continue
        self.path.write_text("".join(k + "\n" for k in keep))

    def log(self, step: int, metrics: dict[str, float], **extra: float) -> None:
        if not self.enabled:
            return
        row = {"step": step, **extra, **metrics, "time": round(time.time() - self.start, 3)}
        self.rows.append(row)
        if self.path is None:
            return
        clean = {k: (v if not (isinstance(v, float) and not math.isfinite(v)) else str(v))
                 for k, v in row.items()}
        with open(self.path, "a") as f:
            f.write(json.dumps(clean) + "\n")
        if self.tb is not None:
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and math.isfinite(value):
                    self.tb.add_scalar(key, value, step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.flush()
            self.tb.close()


def _summary_writer(folder: Path, purge_step: int | None = None):
    """A TensorBoard writer, or None with one warning when the ``tensorboard`` extra is absent:
    training goes on and metrics.jsonl holds every logged value either way."""
    try:
        require("tensorboard", "TensorBoard events")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torch.utils.tensorboard import SummaryWriter
    except (MissingExtraError, ImportError) as exc:
        warnings.warn(f"{exc}; training goes on without them (metrics.jsonl has every value)",
                      stacklevel=3)
        return None
    return SummaryWriter(str(folder), purge_step=purge_step)


class RunningMean:
    """Averages each metric over the steps since the last log line."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.count = 0

    def add(self, metrics: dict[str, float]) -> None:
        self.count += 1
        for k, v in metrics.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(v)

    def pop(self) -> dict[str, float]:
        out = {k: v / max(self.count, 1) for k, v in self.sums.items()}
        self.sums, self.count = {}, 0
        return out
