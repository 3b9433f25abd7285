"""CIFAR-10 (Krizhevsky 2009), the "python version": ``cifar-10-batches-py/data_batch_1..5``
and ``test_batch``, each a pickled dict with ``data`` ``(N, 3072)`` uint8 (CHW rows) and
``labels``.

Pickle can run code, so the batches are read with an unpickler that only resolves numpy's
array-reconstruction functions, ``ndarray`` and ``dtype``: a file that names anything else is
refused before it runs (``_codecs.encode`` is also allowed: it only turns text into bytes).
If the batches are absent, ``cifar10_samples.npz`` (the 200 + 20 real
images in shared/data, keys ``x_train``/``x_test`` HWC) is read instead, for smoke tests.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from shortrun.data.base import DataOptions, LoadedData, read_npz, resolve_data_dir
from shortrun.data.svhn import RGB_INFO, to_model_space
from shortrun.errors import DataError
from shortrun.fields import fld

WHERE = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
FOLDER = "cifar-10-batches-py"
TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    # Python 3 writes bytes in protocol-2 pickles as _codecs.encode(str, "latin1"): data only.
    ("_codecs", "encode"),
}


@dataclass
class Cifar10Options(DataOptions):
    name: str = fld("cifar10", choices=("cifar10",))
    n_train: int | None = fld(None, gt=0, doc="keep only the first n training images")


class _NumpyOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One pickled batch → ``(N, 32, 32, 3)`` uint8 and ``(N,)`` int64 labels."""
    try:
        with open(path, "rb") as f:
            d = _NumpyOnly(f, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise DataError(f"cifar10: cannot read {path}: {exc}; it is not a CIFAR-10 python batch "
                        f"(get them from {WHERE})") from None
    d = {(k.decode() if isinstance(k, bytes) else k): v for k, v in dict(d).items()}
    if "data" not in d or "labels" not in d:
        raise DataError(f"cifar10: {path} has no data/labels entries; expected a batch from "
                        f"{WHERE}")
    data = np.asarray(d["data"], dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3072:
        raise DataError(f"cifar10: {path}: data has shape {data.shape}, expected (N, 3072)")
    x = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return x, np.asarray(d["labels"], dtype=np.int64)


def load_cifar10(options: Cifar10Options) -> LoadedData:
    root = resolve_data_dir(options.data_dir, "cifar10")
    folder = root / FOLDER
    if folder.is_dir():
        missing = [n for n in (*TRAIN, "test_batch") if not (folder / n).is_file()]
        if missing:
            raise DataError(f"cifar10: missing {folder / missing[0]}; unpack {WHERE} there")
        parts = [read_batch(folder / n) for n in TRAIN]
        x_tr = np.concatenate([p[0] for p in parts])
        y_tr = np.concatenate([p[1] for p in parts])
        x_te, y_te = read_batch(folder / "test_batch")
    elif (root / "cifar10_samples.npz").is_file():
        keys = ("x_train", "y_train", "x_test", "y_test")
        arrays = read_npz(root / "cifar10_samples.npz", keys, WHERE)
        x_tr, y_tr, x_te, y_te = (arrays[k] for k in keys)
    else:
        raise DataError(f"cifar10: no {folder} (or cifar10_samples.npz) in {root}; unpack "
                        f"{WHERE} there")
    if options.n_train is not None:
        x_tr, y_tr = x_tr[: options.n_train], y_tr[: options.n_train]
    return LoadedData(train=to_model_space(x_tr), test=to_model_space(x_te), info=RGB_INFO,
                      train_labels=torch.from_numpy(np.asarray(y_tr, np.int64)),
                      test_labels=torch.from_numpy(np.asarray(y_te, np.int64)))
