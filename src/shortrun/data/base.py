"""What every dataset hands the trainer: tensors in model space plus how to map them back."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from shortrun.errors import DataError
from shortrun.fields import fld

DATA_ENV = "SHORTRUN_DATA"


@dataclass
class DataOptions:
    """Options every dataset understands. Datasets subclass this to add their own."""

    name: str = fld("8gaussians")
    data_dir: str | None = fld(None, doc=f"folder laid out like shared/data; default ${DATA_ENV}")


@dataclass
class DataInfo:
    """Shape and range of one example in model space.

    ``kind`` is ``"vector"`` (low-dimensional real), ``"image"`` (C×H×W real in [low, high])
    or ``"binary"`` ({0, 1} values, any shape).
    """

    shape: tuple[int, ...]
    kind: str
    low: float = float("-inf")
    high: float = float("inf")
    raw_scale: float = 1.0
    raw_offset: float = 0.0

    def to_data_scale(self, x: torch.Tensor) -> torch.Tensor:
        """Model space → the data's own scale (raw coordinates, 0-255 pixels, 0-16 for the
        8×8 digits, {0,1} for binary data): ``x · raw_scale + raw_offset``, clamped to range."""
        if math.isfinite(self.low) and math.isfinite(self.high):
            x = x.clamp(self.low, self.high)
        return x * self.raw_scale + self.raw_offset

    def to_model_scale(self, x) -> torch.Tensor:
        """The data's own scale → model space, the inverse of :meth:`to_data_scale`:
        ``(x − raw_offset) / raw_scale``. Takes a tensor or NumPy array; integer and bool
        input (uint8 pixels, 0-16 digits) comes back as floats. Not clamped, so that input
        outside the model's range stays visible to the models' input checks."""
        if not isinstance(x, torch.Tensor):
            x = torch.as_tensor(x)
        if not x.is_floating_point():
            x = x.to(torch.get_default_dtype())
        if self.raw_scale == 1.0 and self.raw_offset == 0.0:
            return x
        return (x - self.raw_offset) / self.raw_scale

    def to_dict(self) -> dict:
        return {"shape": list(self.shape), "kind": self.kind, "low": self.low,
                "high": self.high, "raw_scale": self.raw_scale, "raw_offset": self.raw_offset}

    @classmethod
    def from_dict(cls, d: dict) -> DataInfo:
        return cls(shape=tuple(d["shape"]), kind=d["kind"], low=d["low"], high=d["high"],
                   raw_scale=d["raw_scale"], raw_offset=d["raw_offset"])

    @property
    def dim(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass
class LoadedData:
    """A dataset in memory, in model space; ``info.to_data_scale`` maps back."""

    train: torch.Tensor
    info: DataInfo
    test: torch.Tensor | None = None
    train_labels: torch.Tensor | None = None
    test_labels: torch.Tensor | None = None
    extras: dict = field(default_factory=dict)


def resolve_data_dir(data_dir: str | None, needed: str) -> Path:
    """The folder of dataset files: the option, else ``$SHORTRUN_DATA``; error if neither."""
    chosen = data_dir or os.environ.get(DATA_ENV)
    if not chosen:
        raise DataError(
            f"{needed} reads files from a data folder: pass --data-dir DIR or set {DATA_ENV}=DIR "
            "(a folder laid out like shared/data, see docs/data.md)"
        )
    path = Path(chosen).expanduser()
    if not path.is_dir():
        raise DataError(f"data folder {str(path)!r} (from --data-dir or {DATA_ENV}) does not "
                        "exist; point it at a folder laid out like shared/data")
    return path


def read_npz(path: Path, keys: tuple[str, ...], get: str = "") -> dict[str, np.ndarray]:
    """The named arrays of a ``.npz`` file; a truncated, foreign or incomplete file is one
    :class:`DataError` naming the file, what is wrong and (``get``) where a good copy is."""
    where = f"; get a fresh copy{' from ' + get if get else ''}"
    try:
        with np.load(path, allow_pickle=False) as f:
            missing = [k for k in keys if k not in f.files]
            if missing:
                raise DataError(f"{path} has no array {missing[0]!r} (it holds "
                                f"{', '.join(f.files) or 'nothing'}; expected "
                                f"{', '.join(keys)}){where}")
            return {k: f[k] for k in keys}
    except DataError:
        raise
    except Exception as exc:  # zipfile.BadZipFile, EOFError, ValueError, OSError, ...
        raise DataError(f"{path} is truncated or not an .npz file ({type(exc).__name__}: "
                        f"{str(exc)[:80]}){where}") from None
