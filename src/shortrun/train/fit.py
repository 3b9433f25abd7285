"""``shortrun.fit``: train a model built in Python on a tensor, array or loaded dataset.

The same Trainer as ``shortrun train``: the keyword options are ``train.*`` keys, checked by
the same code as a YAML recipe, and the run directory holds the same files, so
``shortrun.load(run_dir, ...)`` reads it back.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from shortrun.data.array import ArrayOptions, array_data
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
        seed: int = 0, test: Any = None, **train_options: Any) -> Model:
    """Train ``model`` on ``data`` and return it (in eval mode, on ``train.device``).

    ``data``: a tensor or NumPy array of examples ``(N, ...)`` (mapped to the model's scale
    and its :class:`DataInfo` read off the values, see :func:`shortrun.data.array.array_data`)
    or a ``LoadedData``; ``test``: an optional test array in the same layout. Give
    ``steps`` or ``epochs``; ``batch_size`` and ``lr`` default to ``TrainConfig``'s;
    ``train_options`` are further ``train.*`` keys (``grad_clip=1.0``, ``progress=False``).
    ``run_dir``: where checkpoints and pictures go; default a fresh temporary folder.
    """
    if steps is None and epochs is None:
        raise ConfigError("shortrun.fit: give steps= or epochs= (a positive integer)")
    loaded = data if isinstance(data, LoadedData) else array_data(data, test)
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
