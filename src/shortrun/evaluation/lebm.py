"""``shortrun eval`` for the LEBM: reconstruction MSE, Fréchet distance, anomaly AUPRC.

- ``mse``: mean over test images and pixels of ``(x − g(z))²`` on the model scale [-1, 1],
  with ``z`` one short-run posterior sample (``model.eval_post_steps`` or ``post_steps``).
- ``fd``: Fréchet distance between features of ``eval.n_samples`` short-run prior samples and
  the test split (:func:`shortrun.evaluation.features.model_fd_kid`; ``eval.extractor`` picks
  the feature network, default the dataset's classifier).
- ``auprc``: the paper's MNIST protocol (§5.4): the model is trained without
  ``data.anomaly_digit``; on the test split (``data.anomaly_split``; the recipe sets the pooled
  split, Zenati et al.'s protocol as described; ``zenati`` is the split their loader, which
  the papers ran, produces) that digit is the positive
  class and the score is ``−log p(x, z)`` at a posterior sample (:meth:`LEBM.anomaly_score`).
  ``auprc_trapezoid`` (the papers' formula), ``auroc`` and the class counts are written
  beside it, every score variant from the same draws (``auprc_joint``, ``auprc_tilt``,
  ``auprc_unweighted``), the AUPRC of a random and of a perfectly inverted score
  (``auprc_random``, ``auprc_worst``, ``auprc_trapezoid_worst``), and with a validation
  split the same keys prefixed ``val_``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from shortrun.data.base import LoadedData
from shortrun.errors import ConfigError
from shortrun.evaluation.chains import with_chains
from shortrun.evaluation.features import sampled_fd_kid_group
from shortrun.evaluation.plan import EvalContext, EvalSpec, Group, needs_test_split
from shortrun.metrics.anomaly import class_counts, ranking_metrics, reference_auprcs, save_scores
from shortrun.models.lebm import anomaly_scores_from_terms

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


def check_anomaly(cfg: Any, data: LoadedData, model: Any = None) -> None:
    if (getattr(cfg.data, "anomaly_digit", None) is None or data.test is None
            or data.test_labels is None):
        raise ConfigError(NO_DIGIT)
    if (model is not None and getattr(model, "tilt", True) is None
            and cfg.model.anomaly_score == "tilt"):
        raise ConfigError("--metrics auprc with model.anomaly_score=tilt needs the EBM prior; "
                          "this run has the Gaussian prior: use joint or unweighted")


@torch.no_grad()
def score_terms(model: Any, x: torch.Tensor, steps: int | None, batch_size: int,
                tick: Callable[[int], None] | None = None) -> dict[str, torch.Tensor]:
    """:meth:`LEBM.anomaly_terms` of every image of ``x``, concatenated (float64, CPU)."""
    parts: dict[str, list[torch.Tensor]] = {}
    for i in range(0, len(x), batch_size):
        xb = x[i: i + batch_size].to(model.device)
        for k, v in model.anomaly_terms(xb, steps).items():
            parts.setdefault(k, []).append(v.detach().double().cpu().reshape(-1))
        if tick is not None:
            tick(len(xb))
    return {k: torch.cat(v) for k, v in parts.items()}


def variant_metrics(model: Any, terms: dict[str, torch.Tensor], labels: torch.Tensor,
                    prefix: str = "") -> dict[str, float]:
    """``auprc_<variant>`` (and trapezoid, AUROC) of every score variant from one set of
    terms; the Gaussian-prior model has no ``tilt``."""
    scores = anomaly_scores_from_terms(terms, model.anomaly_sigma)
    out: dict[str, float] = {}
    for name, s in scores.items():
        if name == "tilt" and getattr(model, "tilt", None) is None:
            continue
        out.update(ranking_metrics(s, labels, f"_{name}"))
    return {f"{prefix}{k}": v for k, v in out.items()}


def anomaly_metrics(model: Any, cfg: Any, data: LoadedData, run_dir: Path | None,
                    tick: Callable[[int], None] | None = None) -> dict[str, float]:
    """The held-out-digit protocol; writes ``RUN_DIR/eval_scores.npz`` for the report.

    ``auprc`` / ``auprc_trapezoid`` / ``auroc`` are the configured ``model.anomaly_score``;
    ``auprc_<variant>`` etc. every variant from the same posterior draws; ``auprc_random``
    and ``auprc_worst`` frame them. With a validation split (``data.anomaly_val_digit``) the
    same keys prefixed ``val_`` are computed on it (for selection; never on the test split),
    and its terms are saved beside the test's."""
    check_anomaly(cfg, data, model)
    steps, bs = cfg.model.eval_post_steps, cfg.eval.batch_size
    terms = score_terms(model, data.test, steps, bs, tick)
    labels = (data.test_labels.reshape(-1).cpu() == cfg.data.anomaly_digit).long()
    scores = anomaly_scores_from_terms(terms, model.anomaly_sigma)[cfg.model.anomaly_score]
    out = {**ranking_metrics(scores, labels), **class_counts(labels),
           **reference_auprcs(labels), **variant_metrics(model, terms, labels),
           "anomaly_sigma": float(model.anomaly_sigma)}
    saved = {f"term_{k}": v for k, v in terms.items()}
    if "val" in data.extras:
        val_digit = cfg.data.anomaly_val_digit
        val_terms = score_terms(model, data.extras["val"], steps, bs)
        val_labels = (data.extras["val_labels"].reshape(-1).cpu() == val_digit).long()
        out.update({**variant_metrics(model, val_terms, val_labels, "val_"),
                    **class_counts(val_labels, "val_anomaly"),
                    **{f"val_{k}": v for k, v in reference_auprcs(val_labels).items()}})
        saved.update({f"val_term_{k}": v for k, v in val_terms.items()}, val_labels=val_labels)
    if run_dir is not None:
        save_scores(run_dir, scores, labels, **saved)
    return out


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

            groups.append(Group("auprc", auprc, (lambda: check_anomaly(cfg, data, model),)))
        elif name == "fd":
            groups.append(sampled_fd_kid_group(ctx, ["fd"]))
    return groups


SPEC = EvalSpec(("mse", "fd", "auprc", "chains"), ("mse", "fd"), with_chains(plan))
