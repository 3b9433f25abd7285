"""Automatic recovery from divergence: roll back to the last good checkpoint, lower the lr.

The divergence guard (:func:`shortrun.train.trainer.check_finite`) stops a run whose metrics
turn NaN/inf or whose energies pass ``train.energy_bound``. EBM users' usual remedy (JEM's
tracker: "restart with a lower learning rate") is what ``train.recover: N`` does by itself, up
to N times: reload ``checkpoints/last.pt`` (parameters, optimisers, chains, RNG), multiply
every optimiser's learning rate by ``train.recover_lr_factor`` (the rate in force when it
diverged, so a second recovery lowers it again), drop the metrics logged after the checkpoint
and go on. Each recovery is logged on stderr, in ``metrics.jsonl`` (``recovered``) and in
``provenance.json`` (an ``event: recovery`` entry). With recovery on, a checkpoint of step 0
is written first, so that a divergence before the first regular checkpoint can roll back too.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from shortrun.errors import DivergenceError
from shortrun.train.provenance import PROVENANCE


class Trainer(Protocol):
    """What a roll-back needs of the Trainer (a protocol, so this module does not import the
    Trainer that imports it)."""

    step: int
    run_dir: Path | None
    last_good: int | None
    dist: Any
    optimizers: dict[str, Any]
    logger: Any

    def save(self) -> None: ...

    def _restore(self) -> None: ...


def append_event(run_dir: Path, entry: dict[str, Any]) -> None:
    """Append ``entry`` to ``RUN_DIR/provenance.json`` (atomically; a broken file is left to
    :func:`record_provenance`, which keeps it aside on the next start)."""
    path = Path(run_dir) / PROVENANCE
    try:
        entries = json.loads(path.read_text()) if path.is_file() else []
    except (ValueError, OSError):
        return
    if not isinstance(entries, list):
        return
    entries.append(entry)
    tmp = path.with_name(PROVENANCE + ".tmp")
    tmp.write_text(json.dumps(entries, indent=2) + "\n")
    tmp.replace(path)


class Recovery:
    """``train.recover`` roll-backs at most, each lowering the lr by ``factor``."""

    def __init__(self, max_recoveries: int = 0, factor: float = 0.5) -> None:
        if max_recoveries < 0:
            raise ValueError(f"train.recover must be >= 0; got {max_recoveries}")
        if not 0.0 < factor < 1.0:
            raise ValueError(f"train.recover_lr_factor must lie in (0, 1); got {factor}")
        self.max, self.factor = int(max_recoveries), float(factor)
        self.events: list[dict[str, Any]] = []

    @property
    def enabled(self) -> bool:
        return self.max > 0

    def before_loop(self, trainer: Trainer) -> None:
        """A checkpoint to come back to before the first regular one (step 0 of a fresh run).
        Training in memory (``shortrun.fit`` without ``run_dir``) has no checkpoint to roll
        back to, so a divergence there stops the run as it does without ``train.recover``."""
        if (self.enabled and trainer.last_good is None and not trainer.dist.enabled
                and trainer.run_dir is not None):
            trainer.save()

    def guard(self, trainer: Trainer, check: Callable[..., None], *args: Any) -> bool:
        """Run the divergence ``check(*args)``; True when the step is good, False after a
        roll-back (the caller goes on from ``trainer.step``); re-raises when out of tries."""
        try:
            check(*args)
            return True
        except DivergenceError as exc:
            if (len(self.events) >= self.max or trainer.last_good is None
                    or trainer.dist.enabled):
                if self.events:
                    raise DivergenceError(f"{exc} ({len(self.events)} automatic recoveries "
                                          f"already spent, train.recover={self.max})") from None
                raise
            self.roll_back(trainer, str(exc))
            return False

    def roll_back(self, trainer: Trainer, reason: str) -> None:
        diverged_at = trainer.step + 1
        lrs = {k: [g["lr"] for g in o.param_groups] for k, o in trainer.optimizers.items()}
        trainer._restore()
        for name, opt in trainer.optimizers.items():
            for group, lr in zip(opt.param_groups, lrs[name], strict=True):
                group["lr"] = lr * self.factor
        trainer.logger.truncate_after(trainer.step)
        event = {"event": "recovery", "step": trainer.step, "diverged_at": diverged_at,
                 "n": len(self.events) + 1, "lr_factor": self.factor,
                 "lr": {k: o.param_groups[0]["lr"] for k, o in trainer.optimizers.items()},
                 "reason": reason,
                 "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.events.append(event)
        if trainer.dist.is_main:
            append_event(trainer.run_dir, event)
            trainer.logger.log(trainer.step, {"recovered": float(len(self.events))})
            print(f"shortrun: diverged at step {diverged_at}; rolled back to step "
                  f"{trainer.step} with the learning rate × {self.factor:g} (recovery "
                  f"{len(self.events)} of {self.max})", file=sys.stderr)
