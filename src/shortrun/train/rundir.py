"""Run directories: what a run leaves behind and how to find it again."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import yaml

from shortrun.errors import ConfigError
from shortrun.train.config import Config, config_from_dict

CONFIG = "config.yaml"
LAST = Path("checkpoints") / "last.pt"
OWN_DATA = "data.npz"  # data handed in from Python (see train/own_data.py)


def default_run_dir(recipe: str) -> Path:
    return Path("runs") / f"{recipe or 'run'}-{time.strftime('%Y%m%d-%H%M%S')}"


def prepare_new(run_dir: Path, start_over: bool = False) -> Path:
    """Create a fresh run directory; refuse one that already holds a run.

    ``start_over``: the folder holds a run that stopped before its first checkpoint (a config
    but no ``checkpoints/last.pt``); its logs and pictures are cleared and it starts again.
    """
    run_dir = Path(run_dir)
    if (run_dir / LAST).exists():
        raise ConfigError(f"--out {run_dir} already holds a run; continue it with "
                          f"--resume {run_dir} or choose another --out")
    if (run_dir / CONFIG).exists() and not start_over:
        raise ConfigError(f"--out {run_dir} holds a run that stopped before its first "
                          f"checkpoint; start it over from step 0 with its saved config "
                          f"(`shortrun train --resume {run_dir}`, --set to change values) or "
                          "choose another --out")
    try:
        if start_over:
            _clear_outputs(run_dir)
        (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
        (run_dir / "samples").mkdir(exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {run_dir}: cannot create the run directory "
                          f"({exc.strerror or type(exc).__name__}: {exc.filename}); choose a "
                          "folder you can write to") from None
    return run_dir


def _clear_outputs(run_dir: Path) -> None:
    """What a run that never checkpointed left behind: logs, events and pictures."""
    (run_dir / "metrics.jsonl").unlink(missing_ok=True)
    if (run_dir / "tb").is_dir():
        shutil.rmtree(run_dir / "tb")
    for picture in (run_dir / "samples").glob("step_*"):
        picture.unlink()


def has_checkpoint(run_dir: Path) -> bool:
    return (Path(run_dir) / LAST).is_file()


def read_config(run_dir: Path, overrides: list[str] | None = None) -> Config:
    """The resolved config a run saved, with optional ``--set`` overrides on top."""
    from shortrun.train.config import apply_overrides

    path = Path(run_dir) / CONFIG
    if not path.is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no {CONFIG}); give the --out "
                          "folder of a `shortrun train` run")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    _follow_moved_data(raw, Path(run_dir))
    return config_from_dict(apply_overrides(raw, overrides or []))


def _follow_moved_data(raw: dict, run_dir: Path) -> None:
    """A run directory that was moved or copied still finds its own ``data.npz``."""
    data = raw.get("data")
    if not isinstance(data, dict) or data.get("name") != "npz" or not data.get("path"):
        return
    here = run_dir / OWN_DATA
    if Path(data["path"]).name == OWN_DATA and not Path(data["path"]).is_file() and here.is_file():
        data["path"] = str(here.resolve())
