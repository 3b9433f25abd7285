"""``shortrun eval`` for the LEBM: reconstruction MSE, Fréchet distance, anomaly AUPRC.

- ``mse``: mean over test images and pixels of ``(x − g(z))²`` on the model scale [-1, 1],
  with ``z`` one short-run posterior sample (``model.eval_post_steps`` or ``post_steps``).
- ``fd``: Fréchet distance between features of ``eval.n_samples`` short-run prior samples and
  the test split (:func:`shortrun.evaluation.features.model_fd_kid`; ``eval.extractor`` picks
  the feature network, default the dataset's classifier).
- ``auprc``: the paper's MNIST protocol (§5.4): the model is trained without
  ``data.anomaly_digit``; on the test split (``data.anomaly_split``; the recipe sets the pooled
  split of Zenati et al. 2018 that the paper's comparisons use) that digit is the positive
  class and the score is ``−log p(x, z)`` at a posterior sample (:meth:`LEBM.anomaly_score`).
  ``auprc_trapezoid`` (the papers' formula), ``auroc`` and the class counts are written
  beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from shortrun.data.base import LoadedData
from shortrun.errors import ConfigError
from shortrun.evaluation.features import sampled_fd_kid_group
from shortrun.evaluation.plan import EvalContext, EvalSpec, Group, needs_test_split
from shortrun.metrics.anomaly import heldout_class_eval

NO_TEST = "--metrics mse: the dataset has no test split to reconstruct"
NO_DIGIT = ("--metrics auprc: needs a model trained with data.anomaly_digit set (the held-out "
            "class), e.g. the lebm_mnist_anomaly recipe")


def reconstruction_mse(model: Any, cfg: Any, data: LoadedData,
                       tick: Callable[[int], None] | None = None) -> float:
    """Per-pixel MSE of the test split against its posterior reconstructions."""
    if data.test is None:
        raise ConfigError(NO_TEST)
    steps, bs = cfg.model.eval_post_steps, cfg.eval.batch_size
    total, count = 0.0, 0
    for i in range(0, data.test.shape[0], bs):
        x = data.test[i: i + bs].to(model.device)
        total += float((x - model.reconstruct(x, steps)).pow(2).sum())
        count += x.numel()
        if tick is not None:
            tick(len(x))
    return total / count


def check_anomaly(cfg: Any, data: LoadedData) -> None:
    if (getattr(cfg.data, "anomaly_digit", None) is None or data.test is None
            or data.test_labels is None):
        raise ConfigError(NO_DIGIT)


def anomaly_metrics(model: Any, cfg: Any, data: LoadedData, run_dir: Path | None,
                    tick: Callable[[int], None] | None = None) -> dict[str, float]:
    """The held-out-digit protocol; writes ``RUN_DIR/eval_scores.npz`` for the report."""
    check_anomaly(cfg, data)
    steps = cfg.model.eval_post_steps

    def score(x: torch.Tensor) -> torch.Tensor:
        s = model.anomaly_score(x.to(model.device), steps)
        if tick is not None:
            tick(len(x))
        return s

    return heldout_class_eval(score, data.test, data.test_labels, cfg.data.anomaly_digit,
                              run_dir, cfg.eval.batch_size)


def plan(ctx: EvalContext, metrics: list[str]) -> list[Group]:
    cfg, model, data = ctx.cfg, ctx.model, ctx.data
    groups = []
    for name in metrics:
        if name == "mse":
            def mse(done: dict) -> dict:
                with ctx.progress.task("reconstructing", len(data.test), "images") as tick:
                    return {"mse": reconstruction_mse(model, cfg, data, tick)}

            groups.append(Group("mse", mse, (needs_test_split(data, NO_TEST),)))
        elif name == "auprc":
            def auprc(done: dict) -> dict:
                with ctx.progress.task("scoring", len(data.test), "images") as tick:
                    return anomaly_metrics(model, cfg, data, ctx.run_dir, tick)

            groups.append(Group("auprc", auprc, (lambda: check_anomaly(cfg, data),)))
        elif name == "fd":
            groups.append(sampled_fd_kid_group(ctx, ["fd"]))
    return groups


SPEC = EvalSpec(("mse", "fd", "auprc"), ("mse", "fd"), plan)
