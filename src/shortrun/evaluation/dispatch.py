"""One entry point for evaluation: :func:`evaluate` (a model and its run config) and
:func:`evaluate_run` (a loaded run; what ``shortrun eval`` calls).

The order of work: choose the metrics, load the data, plan the metric groups, run every
group's checks (nothing computed yet), then compute group by group under ``eval.seed``. With
``evaluate_run`` each finished group is merged into ``RUN_DIR/eval.json`` at once (temp file +
``os.replace``), so a later failure keeps what was finished.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from shortrun.data.base import LoadedData
from shortrun.errors import ShortrunError
from shortrun.evaluation.plan import EvalContext, Group, Results
from shortrun.evaluation.progress import Progress
from shortrun.evaluation.registry import choose_metrics, eval_spec
from shortrun.metrics.calibration import reliability_summary

EVAL_FILE = "eval.json"


def evaluate(cfg: Any, model: Any, metrics: list[str] | None = None, *,
             data: LoadedData | None = None, run_dir: Path | None = None,
             progress: Progress | None = None,
             on_group: Callable[[Group, Results], None] | None = None) -> Results:
    """Compute ``metrics`` (default ``cfg.eval.metrics``, else the model's defaults) for
    ``model`` under the run config ``cfg``; returns the eval.json keys.

    ``data`` defaults to ``load_data(cfg.data)``; ``run_dir`` receives pictures and score
    files where a metric writes them; ``on_group(group, results)`` runs after each group."""
    requested = list(metrics) if metrics else list(cfg.eval.metrics)
    chosen = choose_metrics(model, cfg, model.info, requested)
    if data is None:
        from shortrun.data.registry import load_data

        data = load_data(cfg.data)
    ctx = EvalContext(cfg, model, data, Path(run_dir) if run_dir is not None else None,
                      progress or Progress.off())
    groups = eval_spec(model).plan(ctx, chosen)
    preflight(groups)
    results: Results = {}
    # eval.seed makes eval repeatable; the caller's random stream is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.eval.seed)
        for group in groups:
            with ctx.progress.group(group.name):
                got = group.compute(dict(results))
            results.update(got)
            if on_group is not None:
                on_group(group, got)
    return results


#: a value longer than this is summarised in the eval table (eval.json keeps it whole)
TABLE_WIDTH = 60


def table_lines(results: Results) -> list[str]:
    """The table ``shortrun eval`` prints: one line a key, numbers to 6 digits. A reliability
    table (JEM's ``reliability``) is summarised in one line; any other value too long for a
    line is named by its size; eval.json has each in full."""
    width = max([len("metric"), *(len(k) for k in results)])
    lines = [f"{'metric':<{width}}  value"]
    for key, value in results.items():
        lines.append(f"{key:<{width}}  {shown_value(value)}")
    return lines


def shown_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict) and {"confidence", "accuracy", "count"} <= value.keys():
        return (reliability_summary(value["confidence"], value["accuracy"], value["count"])
                + " (see shortrun report)")
    text = str(value)
    if len(text) <= TABLE_WIDTH:
        return text
    if isinstance(value, dict):
        return f"{len(value)} entries ({', '.join(map(str, value))[:TABLE_WIDTH]}); see eval.json"
    if isinstance(value, (list, tuple)):
        return f"{len(value)} values; see eval.json"
    return text[:TABLE_WIDTH] + "…; see eval.json"


def preflight(groups: list[Group]) -> None:
    """Run every group's checks before any work; all problems in one line.

    Checks may load things (an extractor run, a language model); they run on a forked random
    stream so the metrics see the same stream as if no check had run."""
    problems: list[ShortrunError] = []
    with torch.random.fork_rng(devices=[]):
        for group in groups:
            for check in group.checks:
                try:
                    check()
                except ShortrunError as exc:
                    if str(exc) not in map(str, problems):
                        problems.append(exc)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        first = problems[0]
        raise type(first)("; ".join(str(p) for p in problems)) from None


def evaluate_run(run: Any, metrics: list[str] | None = None, *, data: LoadedData | None = None,
                 progress: Progress | None = None, write: bool = True) -> Results:
    """:func:`evaluate` a loaded run (:func:`shortrun.run.load_run`); with ``write``, each
    finished group is merged into ``RUN_DIR/eval.json`` with the run's ``step``."""
    path = Path(run.run_dir) / EVAL_FILE if write and run.run_dir is not None else None

    def save(group: Group, got: Results) -> None:
        if path is not None:
            merge_eval_json(path, got, run.step)

    results = evaluate(run.cfg, run.model, metrics, data=data, run_dir=run.run_dir,
                       progress=progress, on_group=save)
    if path is not None and not results:
        merge_eval_json(path, {}, run.step)
    return results


def merge_eval_json(path: Path, new: Results, step: int) -> None:
    """Merge ``new`` into the JSON at ``path`` (keys from earlier evals stay) and set ``step``;
    written to a temp file in the same folder and ``os.replace``d, so a reader (or a crash)
    never sees half a file."""
    path = Path(path)
    merged = json.loads(path.read_text()) if path.is_file() else {}
    merged.update(new)
    merged["step"] = step
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(merged, indent=2, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
