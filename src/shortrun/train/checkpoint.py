"""Checkpoints: plain dicts of tensors and containers, written atomically, loaded safely.

Written as temp file + fsync + ``os.replace`` so a run killed at any moment leaves either the
previous checkpoint or the new one, never a torn file. Loaded with ``weights_only=True`` so a
file that tries to run code is refused before anything runs.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import torch

from shortrun.errors import CheckpointError

FORMAT = "shortrun-checkpoint"
VERSION = 1


def save_checkpoint(state: dict[str, Any], path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    payload = {"format": FORMAT, "version": VERSION, **state}
    with open(tmp, "wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load_checkpoint(path: Path, model_name: str | None = None,
                    map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load and validate a checkpoint; every failure is a one-line :class:`CheckpointError`."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}: the run has not saved one yet, or the "
                              "path is wrong")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path} was refused: it holds Python objects beyond tensors and "
                              f"plain containers, so loading it could run code ({first[:120]})"
                              ) from None
    except Exception as exc:  # garbage bytes can raise almost anything inside the unpickler
        raise CheckpointError(f"{path} is truncated or not a checkpoint "
                              f"({type(exc).__name__}); use an intact copy") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a shortrun checkpoint")
    if state.get("version") != VERSION:
        raise CheckpointError(f"{path} has checkpoint version {state.get('version')}; this "
                              f"shortrun reads version {VERSION}")
    if model_name is not None and state.get("model_name") != model_name:
        raise CheckpointError(f"{path} holds a {state.get('model_name')!r} model, but the config "
                              f"asks for {model_name!r}")
    return state


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
