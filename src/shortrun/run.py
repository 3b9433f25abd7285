"""Loading a finished (or running) run: the CLI's ``load_run`` and Python's ``shortrun.load``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from shortrun.data.base import DataInfo
from shortrun.errors import ConfigError
from shortrun.fields import build_section
from shortrun.models.base import Model
from shortrun.models.registry import build_model, model_class
from shortrun.speed.layout import settle_layouts
from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.config import Config, TrainConfig
from shortrun.train.rundir import LAST, read_config


@dataclass
class LoadedRun:
    cfg: Config
    model: Model
    step: int
    run_dir: Path | None = None

    def to_data_scale(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.info.to_data_scale(x)


def load_run(run_dir: Path, overrides: list[str] | None = None) -> LoadedRun:
    """A run directory's config (with ``--set`` overrides) and its model at the last step."""
    last = Path(run_dir) / LAST
    # the checkpoint before the config: a Python-built run's config names data no recipe knows
    state = load_checkpoint(last) if last.is_file() else None
    user = (state or {}).get("user_networks")
    if user:
        raise ConfigError(f"{run_dir}: this model was built from your own networks "
                          f"({', '.join(user)}); load it in Python with "
                          f"shortrun.load(run_dir, {user[0]}=YourNetwork())")
    cfg = read_config(run_dir, overrides)
    if state is None or state.get("model_name") != cfg.model.name:
        state = load_checkpoint(last, cfg.model.name)  # raises the one-line reason
    info = DataInfo.from_dict(state["data_info"])
    model = build_model(cfg, info)
    model.load_state_dict(state["model"])
    model.eval()
    settle_layouts(model, cfg.train.batch_size)  # an LEBM generator's, as its training's
    return LoadedRun(cfg, model, int(state["step"]), Path(run_dir))


def checkpoint_path(path: str | Path) -> Path:
    """A run directory's last checkpoint, or ``path`` itself when it is a checkpoint file."""
    path = Path(path)
    if path.is_dir():
        return path / LAST
    if path.is_file():
        return path
    raise ConfigError(f"shortrun.load: {str(path)!r} does not exist; give a run directory "
                      "(the --out of `shortrun train`, or run_dir of shortrun.fit) or a .pt "
                      "checkpoint file")


def load(path: str | Path, map_location: str | torch.device = "cpu",
         **networks: nn.Module) -> Model:
    """The model of a run directory or of a lone checkpoint file (which embeds its config),
    in eval mode.

    A model built from a recipe is rebuilt from its config. A model built from your own
    networks needs them back by keyword, fresh instances of the same classes:
    ``shortrun.load(run_dir, energy=MyEnergy())``."""
    state = load_checkpoint(checkpoint_path(path), map_location=map_location)
    raw = state.get("config") or {}
    model_raw = dict(raw.get("model") or {})
    cls = model_class(str(model_raw.get("name", state.get("model_name", ""))))
    options = build_section("model", cls.Config, model_raw)
    info = DataInfo.from_dict(state["data_info"])
    user = list(state.get("user_networks") or [])
    unknown = sorted(set(networks) - set(cls.networks))
    if unknown:
        takes = ", ".join(cls.networks) or "none"
        raise ConfigError(f"shortrun.load: {cls.__name__} takes no network {unknown[0]!r}; "
                          f"its networks are: {takes}")
    if not user:
        if networks:
            raise ConfigError(f"shortrun.load: this {cls.__name__} was built from its config; "
                              "load it without network keywords")
        model = cls.from_config(options, info)
    else:
        missing = [k for k in user if k not in networks]
        if missing:
            raise ConfigError(f"shortrun.load: this {cls.__name__} was trained with your own "
                              f"{missing[0]} network; pass it back: shortrun.load(path, "
                              f"{missing[0]}=YourNetwork()) (a fresh instance of the same class)")
        given: dict[str, Any] = {k: networks.get(k) for k in cls.networks}
        model = cls(**given, options=options, info=info)
    model.load_state_dict(state["model"])
    model.sample_steps = (raw.get("sample") or {}).get("steps")
    model.to(map_location)
    model.eval()
    settle_layouts(model, (raw.get("train") or {}).get("batch_size", TrainConfig.batch_size))
    return model
