"""SVHN (Netzer et al. 2011), the cropped-digits format: ``train_32x32.mat`` / ``test_32x32.mat``.

Files are read from ``DIR/svhn/`` or ``DIR/`` (``--data-dir`` / ``$SHORTRUN_DATA``) with
``scipy.io.loadmat`` (SciPy, the ``svhn`` extra: ``pip install 'shortrun[svhn]'``): ``X`` is
``(32, 32, 3, N)`` uint8, ``y`` is ``(N, 1)`` with label 10 for the digit 0. Images go to
``[-1, 1]`` as ``(N, 3, 32, 32)``, the LEBM paper's scaling.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from shortrun.data.base import DataInfo, DataOptions, LoadedData, resolve_data_dir
from shortrun.errors import DataError
from shortrun.extras import require
from shortrun.fields import fld

WHERE = "http://ufldl.stanford.edu/housenumbers/ (train_32x32.mat, test_32x32.mat)"
RGB_INFO = DataInfo(shape=(3, 32, 32), kind="image", low=-1.0, high=1.0, raw_scale=127.5,
                    raw_offset=127.5)


@dataclass
class SvhnOptions(DataOptions):
    name: str = fld("svhn", choices=("svhn",))
    n_train: int | None = fld(None, gt=0, doc="keep only the first n training images")


def to_model_space(hwc_uint8: np.ndarray) -> torch.Tensor:
    """``(N, H, W, C)`` uint8 → ``(N, C, H, W)`` float in [-1, 1]."""
    x = torch.from_numpy(np.ascontiguousarray(hwc_uint8)).permute(0, 3, 1, 2).float()
    return (x / 127.5 - 1.0).contiguous()


def _find(root: Path, fname: str) -> Path:
    for path in (root / "svhn" / fname, root / fname):
        if path.is_file():
            return path
    raise DataError(f"svhn: missing {fname} in {root / 'svhn'} (or {root}); get it from {WHERE}")


def read_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One SVHN ``.mat`` → ``(N, 32, 32, 3)`` uint8 images and ``(N,)`` labels 0-9."""
    loadmat = require("scipy.io", "SVHN .mat files").loadmat
    try:
        mat = loadmat(str(path))
    except Exception as exc:  # scipy raises several types for a damaged file
        raise DataError(f"svhn: cannot read {path}: {exc}; re-download it from {WHERE}") from None
    if "X" not in mat or "y" not in mat:
        raise DataError(f"svhn: {path} has no X/y arrays; expected the cropped-digits format "
                        f"(*_32x32.mat) from {WHERE}")
    x, y = mat["X"], np.asarray(mat["y"]).reshape(-1)
    if x.ndim != 4 or x.shape[:3] != (32, 32, 3) or x.shape[3] != y.shape[0]:
        raise DataError(f"svhn: {path}: X has shape {x.shape}, expected (32, 32, 3, N) with N = "
                        f"{y.shape[0]} labels")
    return np.transpose(x, (3, 0, 1, 2)).astype(np.uint8), (y % 10).astype(np.int64)


def load_svhn(options: SvhnOptions) -> LoadedData:
    root = resolve_data_dir(options.data_dir, "svhn")
    x_tr, y_tr = read_mat(_find(root, "train_32x32.mat"))
    x_te, y_te = read_mat(_find(root, "test_32x32.mat"))
    if options.n_train is not None:
        x_tr, y_tr = x_tr[: options.n_train], y_tr[: options.n_train]
    return LoadedData(train=to_model_space(x_tr), test=to_model_space(x_te), info=RGB_INFO,
                      train_labels=torch.from_numpy(y_tr), test_labels=torch.from_numpy(y_te))
