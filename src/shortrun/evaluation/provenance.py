"""Where a Fréchet distance comes from, written beside it in eval.json.

An FD (or FID) means little without its extractor, its reference set and its sample sizes:
the estimate is biased upward by about ``Tr Σ / n`` (Chong & Forsyth 2020), so even a perfect
generator scores above 0, by an amount that depends on the extractor and on ``n``. Every
model FD in eval.json therefore carries:

- ``fd_extractor`` (its name) and ``fd_extractor_sha256`` (SHA-256 of its weights,
  :func:`shortrun.metrics.features.state_dict_sha256`);
- ``fd_reference`` (``test``, else ``train``) and ``fd_n_ref`` (its size), ``fd_n`` (the
  number of generated samples);
- ``fd_floor``: the FD of ``fd_floor_n`` real images (``fd_floor_real``: drawn at random,
  seed ``eval.seed``, from the training split) against the same reference with the same
  extractor: what a perfect generator would score at that ``n``.

The floor costs one feature pass over the real images; it is cached in
``$SHORTRUN_CACHE/fd_floors.json`` (default ``$XDG_CACHE_HOME/shortrun`` or
``~/.cache/shortrun``), keyed by the SHA-256 of
the weights, of the reference images and of the real images, so a changed dataset or
extractor never reuses a stale floor.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from shortrun.data.base import LoadedData
from shortrun.metrics.features import Extractor
from shortrun.metrics.frechet import frechet_distance

CACHE_ENV = "SHORTRUN_CACHE"
FLOORS_FILE = "fd_floors.json"


def reference_split(data: LoadedData) -> tuple[str, torch.Tensor]:
    """The split an FD compares with: the test split, else the training split."""
    return ("test", data.test) if data.test is not None else ("train", data.train)


def real_sample(data: LoadedData, n: int, seed: int) -> torch.Tensor:
    """``n`` training images drawn at random (MNIST's splits are ordered by writer)."""
    g = torch.Generator().manual_seed(seed)
    return data.train[torch.randperm(len(data.train), generator=g)[: min(n, len(data.train))]]


def tensor_sha256(x: torch.Tensor) -> str:
    t = x.detach().cpu().contiguous()
    h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}|".encode())
    h.update(t.numpy().tobytes())
    return h.hexdigest()


def cache_path() -> Path:
    """``$SHORTRUN_CACHE/fd_floors.json``, else under ``$XDG_CACHE_HOME/shortrun`` or
    ``~/.cache/shortrun`` (beside the route cache of :mod:`shortrun.speed.cache`)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser() / FLOORS_FILE
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root).expanduser() / "shortrun" / FLOORS_FILE


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, json.JSONDecodeError):  # a broken cache is recomputed, never fatal
        return {}


def _write_cache(path: Path, cache: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".fd_floors.", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(cache, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:  # a read-only home: the floor is still reported, only not cached
        pass


def fd_floor(extractor: Extractor, data: LoadedData, n: int, reference_features: np.ndarray,
             reference: torch.Tensor, batch_size: int, seed: int) -> dict[str, Any]:
    """``fd_floor`` / ``fd_floor_n`` / ``fd_floor_real``: real against the reference at the
    generated sample size, from the cache when the same weights and images were seen."""
    real = real_sample(data, n, seed)
    key = hashlib.sha256(json.dumps([
        extractor.weights_sha256, extractor.name if extractor.weights_sha256 is None else "",
        tensor_sha256(reference), tensor_sha256(real), data.info.low, data.info.high,
    ]).encode()).hexdigest()
    path = cache_path()
    cache = _read_cache(path)
    if key not in cache:
        # an extractor without readable weights (a plain function) is never cached
        feats = extractor.features(real, data.info, batch_size)
        value = frechet_distance(feats, reference_features)
        if extractor.weights_sha256 is None:
            return {"fd_floor": value, "fd_floor_n": len(real), "fd_floor_real": "train"}
        cache[key] = value
        _write_cache(path, cache)
    return {"fd_floor": float(cache[key]), "fd_floor_n": len(real), "fd_floor_real": "train"}


def frechet_provenance(extractor: Extractor, data: LoadedData, n_generated: int,
                       reference_features: np.ndarray, batch_size: int, seed: int,
                       ) -> dict[str, Any]:
    """Every provenance key of the module docstring, for FDs of ``n_generated`` samples."""
    split, reference = reference_split(data)
    return {"fd_extractor": extractor.name, "fd_extractor_sha256": extractor.weights_sha256,
            "fd_reference": split, "fd_n_ref": len(reference), "fd_n": n_generated,
            **fd_floor(extractor, data, n_generated, reference_features, reference,
                       batch_size, seed)}
