"""What an evaluation is made of: metric groups, each checked before any is computed.

A model's evaluator turns the requested metric names into :class:`Group` s. A group is the
unit that shares work (FD and KID share one set of samples) and the unit written to eval.json
as soon as it finishes. Its ``checks`` run for every group before the first group computes, so
a missing extractor, test split or language model is reported in seconds, not after an hour of
MSE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shortrun.data.base import LoadedData
from shortrun.errors import ConfigError
from shortrun.evaluation.progress import Progress

Results = dict[str, Any]


@dataclass
class EvalContext:
    """Everything a metric may read. ``cfg`` is the run's Config: ``cfg.model`` (the model's
    options, eval-time ones included), ``cfg.eval``, ``cfg.data``, ``cfg.sample``."""

    cfg: Any
    model: Any
    data: LoadedData
    run_dir: Path | None = None
    progress: Progress = field(default_factory=Progress.off)

    @property
    def batch_size(self) -> int:
        return self.cfg.eval.batch_size


@dataclass(frozen=True)
class Group:
    """Metrics computed together. ``compute(done)`` gets the results so far and returns the
    new eval.json keys; each check raises a one-line ShortrunError naming what is missing."""

    name: str
    compute: Callable[[Results], Results]
    checks: tuple[Callable[[], None], ...] = ()


@dataclass(frozen=True)
class EvalSpec:
    """A model's evaluation: the names ``eval --metrics`` accepts, its defaults, the planner,
    and optionally ``choose(cfg, info, requested, model_name)`` for defaults (and refusals)
    that depend on the data."""

    metrics: tuple[str, ...]
    default_metrics: tuple[str, ...]
    plan: Callable[[EvalContext, list[str]], list[Group]]
    choose: Callable[[Any, Any, list[str], str], list[str]] | None = None


def check_names(model_name: str, spec: EvalSpec, requested: list[str]) -> list[str]:
    """``requested`` (or the defaults when empty), refusing names the model does not know."""
    chosen = list(requested) or list(spec.default_metrics)
    unknown = [m for m in chosen if m not in spec.metrics]
    if unknown:
        raise ConfigError(f"--metrics: {', '.join(unknown)} not available for model "
                          f"{model_name!r}; available: {', '.join(spec.metrics) or 'none'}")
    return chosen


def needs_test_split(data: LoadedData, message: str, labels: bool = False) -> Callable[[], None]:
    """A check: the data has a test split (with labels when ``labels``)."""

    def check() -> None:
        if data.test is None or (labels and data.test_labels is None):
            raise ConfigError(message)

    return check
