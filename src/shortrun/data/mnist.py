"""MNIST and Fashion-MNIST from the standard files under ``--data-dir`` / ``$SHORTRUN_DATA``.

Either layout is read (the first found wins):

- arrays: ``mnist.npz`` (keys ``x_train``, ``y_train``, ``x_test``, ``y_test``), or
  ``fashion_mnist_train_0.npz`` + ``fashion_mnist_train_1.npz`` + ``fashion_mnist_test.npz``;
- idx files: ``mnist/train-images-idx3-ubyte.gz`` (and the other three), or the same names
  under ``fashion_mnist/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from shortrun.data.anomaly_split import SPLITS, carve_validation
from shortrun.data.anomaly_split import pooled_anomaly_split as pooled_anomaly_split
from shortrun.data.base import DataInfo, DataOptions, LoadedData, read_npz, resolve_data_dir
from shortrun.data.idx import read_idx
from shortrun.errors import ConfigError, DataError
from shortrun.fields import fld

IDX_NAMES = {
    "x_train": "train-images-idx3-ubyte.gz",
    "y_train": "train-labels-idx1-ubyte.gz",
    "x_test": "t10k-images-idx3-ubyte.gz",
    "y_test": "t10k-labels-idx1-ubyte.gz",
}
WHERE = {
    "mnist": "http://yann.lecun.com/exdb/mnist/ (or shared/data/mnist.npz)",
    "fashion": "https://github.com/zalandoresearch/fashion-mnist (data/fashion/*.gz)",
}


@dataclass
class MnistOptions(DataOptions):
    name: str = fld("mnist", choices=("mnist", "fashion"))
    scale: str = fld("symmetric", choices=("symmetric", "unit"),
                     doc="pixels to [-1, 1] (symmetric) or [0, 1] (unit)")
    binarize: float | None = fld(None, gt=0.0, lt=1.0,
                                 doc="threshold on the [0, 1] scale → {0, 1} values")
    n_train: int | None = fld(None, gt=0, doc="keep only the first n training images")
    anomaly_digit: int | None = fld(None, ge=0, le=9,
                                    doc="the anomalous class, held out of training")
    # "test" by default so that run directories written before this option existed keep the
    # split they were trained on; the lebm_mnist_anomaly recipe sets "pooled"
    anomaly_split: str = fld("test", choices=("pooled", "test", "zenati"),
                             doc="with anomaly_digit: pooled = Zenati et al.'s protocol as "
                                 "described (all 70k images; 80% of the normal ones train, the "
                                 "other 20% + every anomaly test; not their loader's split); "
                                 "test = the standard test split; zenati = the papers' split, "
                                 "bit-exactly the test split of their loader as their scripts "
                                 "run it (docs/lebm.md)")
    anomaly_split_seed: int = fld(42, doc="seed of the pooled split's permutation")
    # default None: off, so every existing recipe trains on exactly the data it did
    anomaly_val_digit: int | None = fld(None, ge=0, le=9,
                                        doc="validation anomaly digit: its training images "
                                            "leave training and become validation anomalies "
                                            "(model and σ selection; the test split is "
                                            "unchanged)")
    anomaly_val_fraction: float = fld(0.1, gt=0.0, lt=1.0,
                                      doc="with anomaly_val_digit: fraction of the training "
                                          "normals held out as validation normals")


def _read_arrays(root: Path, name: str) -> dict[str, np.ndarray]:
    if name == "mnist" and (root / "mnist.npz").is_file():
        return read_npz(root / "mnist.npz", tuple(IDX_NAMES), WHERE[name])
    halves = [root / f"fashion_mnist_train_{i}.npz" for i in (0, 1)]
    test = root / "fashion_mnist_test.npz"
    if name == "fashion" and all(p.is_file() for p in [*halves, test]):
        parts = [read_npz(p, ("x_train", "y_train"), WHERE[name]) for p in halves]
        out = read_npz(test, ("x_test", "y_test"), WHERE[name])
        out["x_train"] = np.concatenate([p["x_train"] for p in parts])
        out["y_train"] = np.concatenate([p["y_train"] for p in parts])
        return out
    folders = ["mnist"] if name == "mnist" else ["fashion_mnist", "fashion"]
    for folder in folders:
        if (root / folder / IDX_NAMES["x_train"]).is_file():
            out = {}
            for key, fname in IDX_NAMES.items():
                path = root / folder / fname
                if not path.is_file():
                    raise DataError(f"{name}: missing {path}; get it from {WHERE[name]}")
                out[key] = read_idx(path)
            return out
    wanted = ("mnist.npz or mnist/train-images-idx3-ubyte.gz" if name == "mnist" else
              "fashion_mnist_train_{0,1}.npz + fashion_mnist_test.npz, or "
              "fashion_mnist/train-images-idx3-ubyte.gz")
    raise DataError(f"{name}: no data files in {root}: expected {wanted}; "
                    f"get them from {WHERE[name]}")


def load_mnist(options: MnistOptions) -> LoadedData:
    root = resolve_data_dir(options.data_dir, options.name)
    arrays = _read_arrays(root, options.name)
    x_train = torch.from_numpy(np.ascontiguousarray(arrays["x_train"])).float() / 255.0
    x_test = torch.from_numpy(np.ascontiguousarray(arrays["x_test"])).float() / 255.0
    y_train = torch.from_numpy(arrays["y_train"].astype(np.int64))
    y_test = torch.from_numpy(arrays["y_test"].astype(np.int64))
    x_val = y_val = None
    if options.anomaly_digit is not None:
        if options.anomaly_split in SPLITS:
            x_train, y_train, x_test, y_test = SPLITS[options.anomaly_split](
                x_train, y_train, x_test, y_test, options.anomaly_digit,
                options.anomaly_split_seed)
        else:
            keep = y_train != options.anomaly_digit
            x_train, y_train = x_train[keep], y_train[keep]
    if options.anomaly_val_digit is not None:
        check_val_digit(options)
        # a seed of its own, so the validation draw never shifts the test protocol's stream
        x_train, y_train, x_val, y_val = carve_validation(
            x_train, y_train, options.anomaly_val_digit, options.anomaly_val_fraction,
            options.anomaly_split_seed + 1)
    if options.n_train is not None:
        x_train, y_train = x_train[: options.n_train], y_train[: options.n_train]
    x_train, x_test = x_train[:, None], x_test[:, None]
    x_train, info = _to_model_space(x_train, options)
    x_test, _ = _to_model_space(x_test, options)
    extras = {}
    if x_val is not None:
        # LoadedData.extras, not a new field: the validation split only anomaly eval reads
        extras = {"val": _to_model_space(x_val[:, None], options)[0], "val_labels": y_val}
    return LoadedData(train=x_train, test=x_test, info=info, train_labels=y_train,
                      test_labels=y_test, extras=extras)


def check_val_digit(options: MnistOptions) -> None:
    if options.anomaly_digit is None:
        raise ConfigError("data.anomaly_val_digit needs data.anomaly_digit (the test anomaly "
                          "class); set both, or drop anomaly_val_digit")
    if options.anomaly_val_digit == options.anomaly_digit:
        raise ConfigError(f"data.anomaly_val_digit={options.anomaly_val_digit} is the test "
                          "anomaly digit; pick another digit, so selection never sees the "
                          "test anomalies")


def _to_model_space(x: torch.Tensor, options: MnistOptions) -> tuple[torch.Tensor, DataInfo]:
    """[0, 1] images to the model's scale, with the DataInfo of that scale."""
    if options.binarize is not None:
        return ((x > options.binarize).float(),
                DataInfo(shape=(1, 28, 28), kind="binary", low=0.0, high=1.0))
    if options.scale == "symmetric":
        return (x * 2 - 1, DataInfo(shape=(1, 28, 28), kind="image", low=-1.0, high=1.0,
                                    raw_scale=127.5, raw_offset=127.5))
    return x, DataInfo(shape=(1, 28, 28), kind="image", low=0.0, high=1.0, raw_scale=255.0)

