"""scikit-learn's bundled 8×8 digits (1,797 images, values 0-16): needs no files."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from shortrun.data.base import DataInfo, DataOptions, LoadedData
from shortrun.fields import fld


@dataclass
class DigitsOptions(DataOptions):
    name: str = fld("digits")
    binarize: bool = fld(False, doc="threshold at 8/16 to {0,1} (for binary RBMs)")
    n_test: int = fld(297, ge=0, doc="the last n images are the test split")


def load_digits(options: DigitsOptions) -> LoadedData:
    from sklearn.datasets import load_digits as sk_load_digits

    bunch = sk_load_digits()
    x = torch.from_numpy(bunch.data).float().reshape(-1, 1, 8, 8)
    y = torch.from_numpy(bunch.target).long()
    cut = len(x) - options.n_test
    if options.binarize:
        x = (x >= 8).float()
        info = DataInfo(shape=(1, 8, 8), kind="binary", low=0.0, high=1.0)
    else:
        x = x / 8.0 - 1.0
        info = DataInfo(shape=(1, 8, 8), kind="image", low=-1.0, high=1.0,
                        raw_scale=8.0, raw_offset=8.0)
    return LoadedData(train=x[:cut], test=x[cut:] if options.n_test else None, info=info,
                      train_labels=y[:cut], test_labels=y[cut:])

