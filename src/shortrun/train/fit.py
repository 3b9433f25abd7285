"""``shortrun.fit``: train a model built in Python on a tensor, array or loaded dataset.

The same Trainer as ``shortrun train``: the keyword options are ``train.*`` keys, checked by
the same code as a YAML recipe, and the run directory holds the same files, so
``shortrun.load(run_dir, ...)`` reads it back.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from shortrun.data.array import ArrayOptions, array_data, as_tensor
from shortrun.data.base import LoadedData
from shortrun.errors import ConfigError
from shortrun.fields import build_section
from shortrun.models.base import Model
from shortrun.train.config import Config, EvalConfig, SampleConfig, TrainConfig
from shortrun.train.trainer import Trainer

#: ``data.name`` of data handed over in Python; the Trainer saves such data to
#: ``RUN_DIR/data.npz`` and the run's config.yaml records ``data.name: npz`` (train/own_data.py),
#: so ``shortrun eval`` / ``sample`` / ``load`` work on the run
ARRAY_DATA = "array"


def fit(model: Model, data: Any, *, run_dir: str | Path | None = None, steps: int | None = None,
        epochs: int | None = None, batch_size: int | None = None, lr: float | None = None,
        seed: int = 0, test: Any = None, labels: Any = None, test_labels: Any = None,
        unlabelled: Any = None, **train_options: Any) -> Model:
    """Train ``model`` on ``data`` and return it (in eval mode, on ``train.device``).

    ``data``: a tensor or NumPy array of examples ``(N, ...)`` (mapped to the model's scale
    and its :class:`DataInfo` read off the values, see :func:`shortrun.data.array.array_data`)
    or a ``LoadedData``; ``test``: an optional test array in the same layout. Give
    ``steps`` or ``epochs``; ``batch_size`` and ``lr`` default to ``TrainConfig``'s;
    ``train_options`` are further ``train.*`` keys (``grad_clip=1.0``, ``progress=False``).
    ``labels`` / ``test_labels``: one class per example, for supervised models (``JEM``,
    ``Classifier``); ``unlabelled``: more examples in ``data``'s layout, appended with the
    label ``-1`` (a JEM uses them in its generative term only).
    ``run_dir``: where checkpoints and pictures go; default a fresh temporary folder.
    """
    if steps is None and epochs is None:
        raise ConfigError("shortrun.fit: give steps= or epochs= (a positive integer)")
    loaded = data if isinstance(data, LoadedData) else _arrays(data, test, labels, test_labels,
                                                              unlabelled)
    values: dict[str, Any] = {"seed": seed, **train_options}
    for key, value in (("steps", steps), ("epochs", epochs), ("batch_size", batch_size),
                       ("lr", lr)):
        if value is not None:
            values[key] = value
    cfg = Config(data=ArrayOptions(name=ARRAY_DATA), model=model.options,
                 train=build_section("train", TrainConfig, values), sample=SampleConfig(),
                 eval=EvalConfig(), description="trained from Python with shortrun.fit")
    check = getattr(cfg.model, "check", None)
    if callable(check):
        check(cfg)
    run_dir = Path(run_dir) if run_dir is not None else Path(
        tempfile.mkdtemp(prefix="shortrun-fit-"))
    trainer = Trainer(cfg, run_dir, data=loaded, model=model)
    try:
        trainer.fit()
    finally:
        trainer.close()
    model.run_dir = run_dir
    return model.eval()


def _arrays(data: Any, test: Any, labels: Any, test_labels: Any, unlabelled: Any) -> LoadedData:
    """The user's arrays as one dataset; unlabelled rows join the training rows with label -1,
    mapped to the model's scale by the same map (it is inferred from all of them)."""
    if unlabelled is None:
        return array_data(data, test, labels, test_labels)
    if labels is None:
        raise ConfigError("shortrun.fit: unlabelled= needs labels= for the labelled examples "
                          "(unlabelled rows get the label -1)")
    x, extra = as_tensor(data, "data"), as_tensor(unlabelled, "unlabelled")
    if tuple(extra.shape[1:]) != tuple(x.shape[1:]):
        raise ConfigError(f"shortrun.fit: unlabelled examples are shaped "
                          f"{tuple(extra.shape[1:])} but data's are {tuple(x.shape[1:])}; "
                          "give both the same layout")
    y = as_tensor(labels if not isinstance(labels, list) else np.asarray(labels), "labels")
    y_all = torch.cat([y.long().reshape(-1), torch.full((len(extra),), -1, dtype=torch.long)])
    return array_data(torch.cat([x, extra.to(x.dtype)]), test, y_all, test_labels)
