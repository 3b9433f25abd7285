"""``shortrun.fit``: train a model built in Python on a tensor, array or loaded dataset.

The same Trainer as ``shortrun train``: the keyword options are ``train.*`` keys (and the
``data.*`` keys of an array: ``binarize``, ``kind``, ``low``, ``high``), checked by the same
code as a YAML recipe. Without ``run_dir`` the run stays in memory: the model (with its chains)
and the logged metrics (``model.history``) are all it leaves, and no file is written. With
``run_dir=`` (or ``checkpoint=True``: a fresh temporary folder) the folder holds the same files
as a ``shortrun train`` run, so ``shortrun.load(run_dir, ...)`` reads it back.

Messages that name a YAML key name the Python argument too (``train.batch_size`` is
``batch_size=``, ``data.binarize`` is ``binarize=``, ``model.k`` the model's ``k=``).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from shortrun.data.array import ArrayOptions, array_data, as_tensor
from shortrun.data.base import LoadedData
from shortrun.errors import ConfigError, ShortrunError
from shortrun.fields import build_section
from shortrun.models.base import Model, install_fit
from shortrun.train.config import Config, EvalConfig, SampleConfig, TrainConfig
from shortrun.train.trainer import Trainer

#: ``data.name`` of data handed over in Python; the Trainer saves such data to
#: ``RUN_DIR/data.npz`` and the run's config.yaml records ``data.name: npz`` (train/own_data.py),
#: so ``shortrun eval`` / ``sample`` / ``load`` work on the run
ARRAY_DATA = "array"

_KEY = re.compile(r"\b(train|data|model)\.([a-z_][a-z0-9_]*)\b")
_WHERE = {"train": "shortrun.fit", "data": "shortrun.fit", "model": "the model's constructor"}


def python_names(message: str) -> str:
    """``message`` with the Python argument of each ``train.X`` / ``data.X`` / ``model.X`` key
    it names appended (``...; from Python: lr= of shortrun.fit for train.lr``)."""
    if "from Python:" in message:
        return message
    found = dict.fromkeys(m.group(0) for m in _KEY.finditer(message))
    if not found:
        return message
    names = ", ".join(f"{key.split('.', 1)[1]}= of {_WHERE[key.split('.', 1)[0]]} for {key}"
                      for key in found)
    return f"{message} (from Python: {names})"


def fit(model: Model, data: Any, *, run_dir: str | Path | None = None, checkpoint: bool = False,
        steps: int | None = None, epochs: int | None = None, batch_size: int | None = None,
        lr: float | None = None, seed: int = 0, test: Any = None, labels: Any = None,
        test_labels: Any = None, unlabelled: Any = None, binarize: float | None = None,
        kind: str = "auto", low: float | None = None, high: float | None = None,
        **train_options: Any) -> Model:
    """Train ``model`` on ``data`` and return it (in eval mode, on ``train.device``).

    ``data``: a tensor or NumPy array of examples ``(N, ...)`` (mapped to the model's scale
    and its :class:`DataInfo` read off the values, see :func:`shortrun.data.array.array_data`;
    ``binarize``, ``kind``, ``low``, ``high`` are its ``data.*`` options) or a ``LoadedData``;
    ``test``: an optional test array in the same layout. Give ``steps`` or ``epochs``;
    ``batch_size`` and ``lr`` default to ``TrainConfig``'s; ``train_options`` are further
    ``train.*`` keys (``grad_clip=1.0``, ``progress=False``).
    ``labels`` / ``test_labels``: one class per example, for supervised models (``JEM``,
    ``Classifier``); ``unlabelled``: more examples in ``data``'s layout, appended with the
    label ``-1`` (a JEM uses them in its generative term only).

    ``run_dir``: where checkpoints, pictures and logs go. Without it nothing is written: the
    model and ``model.history`` (the logged metric rows) are the result, ``model.run_dir`` is
    None. ``checkpoint=True`` without ``run_dir``: a fresh temporary folder.
    """
    try:
        return _fit(model, data, run_dir, checkpoint, steps, epochs, batch_size, lr, seed, test,
                    dict(labels=labels, test_labels=test_labels, unlabelled=unlabelled),
                    dict(binarize=binarize, kind=kind, low=low, high=high), train_options)
    except ShortrunError as exc:
        renamed = python_names(str(exc))
        if renamed == str(exc):
            raise
        try:
            new = type(exc)(renamed)
        except TypeError:  # an error type that needs more than a message: keep it as it is
            raise exc from None
        raise new.with_traceback(exc.__traceback__) from None


def _fit(model: Model, data: Any, run_dir: str | Path | None, checkpoint: bool,
         steps: int | None, epochs: int | None, batch_size: int | None, lr: float | None,
         seed: int, test: Any, labelled: dict[str, Any], data_options: dict[str, Any],
         train_options: dict[str, Any]) -> Model:
    if steps is None and epochs is None:
        raise ConfigError("shortrun.fit: give steps= or epochs= (a positive integer)")
    if isinstance(data, LoadedData):
        given = [k for k, v in {**data_options, **labelled}.items() if v not in (None, "auto")]
        if given:
            raise ConfigError(f"shortrun.fit: {', '.join(given)}= apply to an array; this data "
                              "is a LoadedData, already in the model's scale")
        loaded = data
    else:
        loaded = _arrays(data, test, **labelled, data_options=data_options)
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
    if run_dir is None and checkpoint:
        run_dir = tempfile.mkdtemp(prefix="shortrun-fit-")
    run_dir = Path(run_dir) if run_dir is not None else None
    trainer = Trainer(cfg, run_dir, data=loaded, model=model)
    try:
        trainer.fit()
    finally:
        trainer.close()
    model.run_dir = run_dir
    model.history = trainer.logger.rows
    return model.eval()


def _arrays(data: Any, test: Any, labels: Any, test_labels: Any, unlabelled: Any,
            data_options: dict[str, Any]) -> LoadedData:
    """The user's arrays as one dataset; unlabelled rows join the training rows with label -1,
    mapped to the model's scale by the same map (it is inferred from all of them)."""
    if unlabelled is None:
        return array_data(data, test, labels, test_labels, **data_options)
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
    return array_data(torch.cat([x, extra.to(x.dtype)]), test, y_all, test_labels,
                      **data_options)


install_fit(fit)
