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

from shortrun.data.base import DataInfo, DataOptions, LoadedData, read_npz, resolve_data_dir
from shortrun.data.idx import read_idx
from shortrun.errors import DataError
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
    anomaly_split: str = fld("test", choices=("pooled", "test"),
                             doc="with anomaly_digit: pooled = the protocol of the papers "
                                 "(all 70k images; 80% of the normal ones train, the other 20% "
                                 "+ every anomaly test); test = the standard test split")
    anomaly_split_seed: int = fld(42, doc="seed of the pooled split's permutation")


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


def pooled_anomaly_split(x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor,
                         y_test: torch.Tensor, digit: int, seed: int = 42
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The held-out-digit split of Zenati et al. (2018, §4.1), which Kumar et al. (2019) and
    Pang et al. (2020, §5.4) report on: pool all images; the normal ones (every class but
    ``digit``) are shuffled with ``numpy.random.RandomState(seed)``, the first 80% train; the
    test split is the other 20% of them plus every image of ``digit``. Returns
    ``(x_train, y_train, x_test, y_test)``, the test split shuffled by the same generator."""
    x_all, y_all = torch.cat([x_train, x_test]), torch.cat([y_train, y_test])
    rng = np.random.RandomState(seed)
    normal = torch.nonzero(y_all != digit).reshape(-1)
    normal = normal[torch.from_numpy(rng.permutation(len(normal)))]
    cut = int(len(normal) * 0.8)
    test_idx = torch.cat([normal[cut:], torch.nonzero(y_all == digit).reshape(-1)])
    # mixed, so that no evaluation batch is all anomalies
    test_idx = test_idx[torch.from_numpy(rng.permutation(len(test_idx)))]
    return x_all[normal[:cut]], y_all[normal[:cut]], x_all[test_idx], y_all[test_idx]


def load_mnist(options: MnistOptions) -> LoadedData:
    root = resolve_data_dir(options.data_dir, options.name)
    arrays = _read_arrays(root, options.name)
    x_train = torch.from_numpy(np.ascontiguousarray(arrays["x_train"])).float() / 255.0
    x_test = torch.from_numpy(np.ascontiguousarray(arrays["x_test"])).float() / 255.0
    y_train = torch.from_numpy(arrays["y_train"].astype(np.int64))
    y_test = torch.from_numpy(arrays["y_test"].astype(np.int64))
    if options.anomaly_digit is not None:
        if options.anomaly_split == "pooled":
            x_train, y_train, x_test, y_test = pooled_anomaly_split(
                x_train, y_train, x_test, y_test, options.anomaly_digit,
                options.anomaly_split_seed)
        else:
            keep = y_train != options.anomaly_digit
            x_train, y_train = x_train[keep], y_train[keep]
    if options.n_train is not None:
        x_train, y_train = x_train[: options.n_train], y_train[: options.n_train]
    x_train, x_test = x_train[:, None], x_test[:, None]
    if options.binarize is not None:
        t = options.binarize
        x_train, x_test = (x_train > t).float(), (x_test > t).float()
        info = DataInfo(shape=(1, 28, 28), kind="binary", low=0.0, high=1.0)
    elif options.scale == "symmetric":
        x_train, x_test = x_train * 2 - 1, x_test * 2 - 1
        info = DataInfo(shape=(1, 28, 28), kind="image", low=-1.0, high=1.0,
                        raw_scale=127.5, raw_offset=127.5)
    else:
        info = DataInfo(shape=(1, 28, 28), kind="image", low=0.0, high=1.0, raw_scale=255.0)
    return LoadedData(train=x_train, test=x_test, info=info, train_labels=y_train,
                      test_labels=y_test)

