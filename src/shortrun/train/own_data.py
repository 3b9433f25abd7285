"""A run trained on data handed in from Python keeps that data, so that pictures and
``shortrun eval`` use it and never the registered dataset the config happens to name.

The Trainer saves such data to ``RUN_DIR/data.npz`` and records ``data.name: npz`` with
``data.path`` in ``config.yaml``; loading the run reloads exactly those tensors.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

from shortrun.data.array import NpzOptions, check_loaded, save_npz
from shortrun.data.base import LoadedData
from shortrun.train.config import Config
from shortrun.train.rundir import OWN_DATA

# metrics that need something only a registered dataset carries (a closed-form density)
NEEDS_DENSITY = ("kl_grid",)


def is_registered(cfg: Config, data: LoadedData) -> bool:
    """True when ``data`` came from ``load_data(cfg.data)`` (stamped with that name and the same
    options, wherever its files were read from), or is text (whose vocabulary lives with the
    registered dataset). The same name drawn with other options (another seed, split or size)
    is other data: loading what the config names would not give it back."""
    if data.info.kind == "text":
        return True
    stamped = data.extras.get("dataset_options", cfg.data)
    return (data.extras.get("dataset") == cfg.data.name
            and _without_folder(stamped) == _without_folder(cfg.data))


def _without_folder(options: object) -> object:
    """``options`` as a comparable value, less ``data_dir`` (where the files were read from)."""
    if not dataclasses.is_dataclass(options) or isinstance(options, type):
        return options
    return type(options), {k: v for k, v in dataclasses.asdict(options).items()
                           if k != "data_dir"}


def adopt_own_data(cfg: Config, data: LoadedData, run_dir: Path) -> Config:
    """The config of a run trained on ``data``: unchanged for the registered dataset, else one
    whose ``data`` section points at ``RUN_DIR/data.npz`` (written by :func:`write_own_data`).

    Metrics that need the named dataset's closed-form density are dropped from
    ``eval.metrics`` with a warning, since the run's own data has none."""
    check_loaded(data)
    if is_registered(cfg, data):
        return cfg
    options = NpzOptions(path=str((Path(run_dir) / OWN_DATA).resolve()), kind=data.info.kind,
                         data_dir=getattr(cfg.data, "data_dir", None))
    eval_cfg = cfg.eval
    dropped = [m for m in eval_cfg.metrics if m in NEEDS_DENSITY] if data.extras.get(
        "density") is None else []
    if dropped:
        warnings.warn(f"eval.metrics: {', '.join(dropped)} dropped: the run trains on data "
                      f"handed in from Python, not on {cfg.data.name!r}, and that data has no "
                      "closed-form density", stacklevel=3)
        eval_cfg = dataclasses.replace(
            eval_cfg, metrics=[m for m in eval_cfg.metrics if m not in dropped])
    return dataclasses.replace(cfg, data=options, eval=eval_cfg)


def write_own_data(cfg: Config, data: LoadedData, run_dir: Path) -> None:
    """Save ``data`` where :func:`adopt_own_data` pointed ``cfg.data`` (no-op otherwise, and
    when a resumed run already holds it)."""
    path = (Path(run_dir) / OWN_DATA).resolve()
    if getattr(cfg.data, "path", None) == str(path) and not path.is_file():
        save_npz(data, path)
