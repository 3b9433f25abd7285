"""``shortrun eval`` for the LEBM: reconstruction MSE, Fréchet distance, anomaly AUPRC.

- ``mse``: mean over test images and pixels of ``(x − g(z))²`` on the model scale [-1, 1],
  with ``z`` one short-run posterior sample (``model.eval_post_steps`` or ``post_steps``).
- ``fd``: Fréchet distance between features of ``eval.n_samples`` short-run prior samples and
  the test split (:func:`shortrun.metrics.features.model_fd_kid`; ``eval.extractor`` picks the
  feature network, default the dataset's classifier).
- ``auprc``: the paper's MNIST protocol (§5.4): the model is trained without
  ``data.anomaly_digit``; on the test split (``data.anomaly_split``; the recipe sets the pooled
  split of Zenati et al. 2018 that the paper's comparisons use) that digit is the positive
  class and the score is ``−log p(x, z)`` at a posterior sample (:meth:`LEBM.anomaly_score`).
  ``auprc_trapezoid`` (the papers' formula), ``auroc`` and the class counts are written
  beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from shortrun.errors import ConfigError

if TYPE_CHECKING:
    from shortrun.data.base import LoadedData
    from shortrun.models.lebm import LEBM


def reconstruction_mse(model: LEBM, data: LoadedData, cfg) -> float:
    if data.test is None:
        raise ConfigError("--metrics mse: the dataset has no test split to reconstruct")
    steps, bs = model.options.eval_post_steps, cfg.eval.batch_size
    total, count = 0.0, 0
    for i in range(0, data.test.shape[0], bs):
        x = data.test[i: i + bs].to(model.device)
        total += float((x - model.reconstruct(x, steps)).pow(2).sum())
        count += x.numel()
    return total / count


def anomaly_metrics(model: LEBM, data: LoadedData, run_dir: Path | None,
                    cfg) -> dict[str, float]:
    from shortrun.metrics.anomaly import heldout_class_eval

    digit = getattr(cfg.data, "anomaly_digit", None)
    if digit is None or data.test is None or data.test_labels is None:
        raise ConfigError("--metrics auprc: needs a model trained with data.anomaly_digit set "
                          "(the held-out class), e.g. the lebm_mnist_anomaly recipe")
    steps = model.options.eval_post_steps

    def score(x):
        return model.anomaly_score(x.to(model.device), steps)

    return heldout_class_eval(score, data.test, data.test_labels, digit, run_dir,
                              cfg.eval.batch_size)


def evaluate_lebm(model: LEBM, metrics: list[str], data: LoadedData,
                  run_dir: Path | None, cfg) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in metrics:
        if name == "mse":
            out["mse"] = reconstruction_mse(model, data, cfg)
        elif name == "auprc":
            out.update(anomaly_metrics(model, data, run_dir, cfg))
        elif name == "fd":
            from shortrun.metrics.features import model_fd_kid

            out.update(model_fd_kid(model, data, cfg, ("fd",)))
    return out
