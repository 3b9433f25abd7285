"""Loading a finished (or running) run directory for sampling and evaluation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from shortrun.data.base import DataInfo
from shortrun.models.base import Model
from shortrun.models.registry import build_model
from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.config import Config
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
    cfg = read_config(run_dir, overrides)
    state = load_checkpoint(Path(run_dir) / LAST, cfg.model.name)
    info = DataInfo.from_dict(state["data_info"])
    model = build_model(cfg, info)
    model.load_state_dict(state["model"])
    model.eval()
    return LoadedRun(cfg, model, int(state["step"]), Path(run_dir))

