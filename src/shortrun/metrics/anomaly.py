"""Anomaly detection metrics: area under the precision–recall curve (AUPRC) and ROC (AUROC).

Convention, used everywhere in shortrun: **anomalies are the positive class** (label 1) and
**a higher score means more anomalous** (e.g. an energy ``E(x)`` or a negative log-likelihood).
AUPRC is sklearn's ``average_precision_score`` (the step-wise sum ``Σ (R_n − R_{n−1}) P_n``, not
the trapezoid, which over-estimates; Davis & Goadrich 2006). The anomaly-detection papers we
compare with (Zenati et al. 2018; Kumar et al. 2019; Pang et al. 2020) report the trapezoid,
``sklearn.metrics.auc(recall, precision)``, so it is written beside it as
``auprc_trapezoid``. The held-out-class protocol
(train on all classes but one, score the test split, anomaly = the held-out class) is
:func:`heldout_class_eval`; it writes ``eval_scores.npz`` (keys ``scores``, ``labels``) into the
run directory so ``shortrun report`` can draw the precision–recall curve.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from shortrun.errors import ConfigError

SCORES_FILE = "eval_scores.npz"


def _check(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(scores, torch.Tensor):
        scores = scores.detach().cpu().double().numpy()
    if isinstance(labels, torch.Tensor):
        labels = labels.detach().cpu().numpy()
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1)
    if s.shape != y.shape:
        raise ConfigError(f"anomaly metrics: {s.size} scores but {y.size} labels; give one label "
                          "per score")
    if not np.isin(y, (0, 1)).all():
        raise ConfigError("anomaly metrics: labels must be 0 (normal) or 1 (anomaly)")
    y = y.astype(np.int64)
    if y.min() == y.max():
        raise ConfigError("anomaly metrics: labels hold only one class; need both normal (0) and "
                          "anomalous (1) examples")
    if not np.isfinite(s).all():
        raise ConfigError("anomaly metrics: scores contain NaN or inf; the model diverged")
    return s, y


def auprc(scores, labels) -> float:
    """Average precision with anomalies (label 1) positive; higher score = more anomalous."""
    from sklearn.metrics import average_precision_score

    s, y = _check(scores, labels)
    return float(average_precision_score(y, s))


def auprc_trapezoid(scores, labels) -> float:
    """Trapezoidal area under the precision–recall curve, as the anomaly papers compute it."""
    from sklearn.metrics import auc

    recall, precision = pr_curve(scores, labels)
    return float(auc(recall, precision))


def auroc(scores, labels) -> float:
    """Area under the ROC curve with anomalies (label 1) positive; higher = more anomalous."""
    from sklearn.metrics import roc_auc_score

    s, y = _check(scores, labels)
    return float(roc_auc_score(y, s))


def pr_curve(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    """``(recall, precision)`` arrays of the precision–recall curve."""
    from sklearn.metrics import precision_recall_curve

    s, y = _check(scores, labels)
    precision, recall, _ = precision_recall_curve(y, s)
    return recall, precision


def inverted_scores(labels) -> np.ndarray:
    """The worst possible scores for ``labels``: every normal above every anomaly, all
    distinct (ties would merge into one threshold and give the prevalence instead)."""
    y = np.asarray(labels).reshape(-1)
    s = np.empty(y.size, dtype=np.float64)
    s[np.argsort(y, kind="stable")] = np.arange(y.size, 0, -1, dtype=np.float64)
    return s


def auprc_worst(labels) -> float:
    """Average precision of a perfectly inverted score: with ``n0`` normals ranked first, the
    ``k``-th anomaly is found at precision ``k / (n0 + k)``, so AP ``= mean_k k / (n0 + k)``
    (≈ ``1 − (n0/n1) ln(1 + n1/n0)``). It is not 0: on the papers' MNIST split ≈ 0.19–0.23."""
    _, y = _check(np.zeros(np.asarray(labels).size), labels)
    n1, n0 = int(y.sum()), int((y == 0).sum())
    k = np.arange(1, n1 + 1, dtype=np.float64)
    return float(np.mean(k / (n0 + k)))


def reference_auprcs(labels) -> dict[str, float]:
    """The AUPRCs that frame a result on this split: ``auprc_random`` (the prevalence, the
    expected AP of an uninformative score) and the worst possible (a perfectly inverted score)
    for AP and the trapezoid."""
    y = _check(np.zeros(np.asarray(labels).size), labels)[1]
    worst = inverted_scores(y)
    return {"auprc_random": float(y.mean()), "auprc_worst": auprc_worst(y),
            "auprc_trapezoid_worst": auprc_trapezoid(worst, y)}


def save_scores(run_dir: Path, scores, labels, **arrays) -> Path:
    """Write ``RUN_DIR/eval_scores.npz`` (``scores``, ``labels``, and any named ``arrays``,
    e.g. the terms of a score) for ``shortrun report``."""
    s, y = _check(scores, labels)
    path = Path(run_dir) / SCORES_FILE
    extra = {k: v.detach().cpu().double().numpy() if isinstance(v, torch.Tensor)
             else np.asarray(v) for k, v in arrays.items()}
    np.savez(path, scores=s, labels=y, **extra)
    return path


def ranking_metrics(scores, labels, suffix: str = "") -> dict[str, float]:
    """``auprc``, ``auprc_trapezoid``, ``auroc`` of one score, keys ending in ``suffix``."""
    return {f"auprc{suffix}": auprc(scores, labels),
            f"auprc_trapezoid{suffix}": auprc_trapezoid(scores, labels),
            f"auroc{suffix}": auroc(scores, labels)}


@torch.no_grad()
def heldout_class_eval(score_fn: Callable[[torch.Tensor], torch.Tensor], x_test: torch.Tensor,
                       y_test: torch.Tensor, anomaly_class: int, run_dir: Path | None = None,
                       batch_size: int = 500) -> dict[str, float]:
    """Held-out-class protocol: score every test example; anomalies are ``anomaly_class``.

    ``score_fn`` maps a batch to ``(B,)`` scores, higher = more anomalous. Returns ``auprc``,
    ``auprc_trapezoid``, ``auroc`` and the counts; writes ``eval_scores.npz`` when ``run_dir``
    is given. ``auprc_random`` / ``auprc_worst`` / ``auprc_trapezoid_worst``
    (:func:`reference_auprcs`) frame the value."""
    if anomaly_class is None:
        raise ConfigError("auprc/auroc need data.anomaly_digit: the class held out of training "
                          "that the test split treats as anomalous")
    scores = torch.cat([score_fn(x_test[i : i + batch_size]).detach().double().cpu().reshape(-1)
                        for i in range(0, len(x_test), batch_size)])
    labels = (y_test.reshape(-1).cpu() == anomaly_class).long()
    if run_dir is not None:
        save_scores(run_dir, scores, labels)
    return {**ranking_metrics(scores, labels), **class_counts(labels),
            **reference_auprcs(labels)}


def class_counts(labels, prefix: str = "anomaly") -> dict[str, float]:
    y = torch.as_tensor(labels).reshape(-1)
    return {f"{prefix}_n": int(y.sum()), f"{prefix}_n_normal": int((y == 0).sum()),
            f"{prefix}_prevalence": float(y.double().mean())}
