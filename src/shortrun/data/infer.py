"""A user's own tensor or NumPy array as a dataset: its :class:`DataInfo` read off the values.

``shortrun.fit(model, x)`` uses this when ``x`` is an array rather than a registered dataset:

- values all in {0, 1}: ``binary`` (any shape; what the Bernoulli RBM needs);
- ``(N, d)``: ``vector``, unbounded;
- ``(N, C, H, W)``: ``image`` with the observed ``[min, max]`` as the range.

Nothing is rescaled: the model works in the array's own scale (``raw_scale`` 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from shortrun.data.base import DataInfo, LoadedData
from shortrun.errors import DataError


def as_float_tensor(x: Any, what: str = "data") -> torch.Tensor:
    """A float32 tensor from a tensor or NumPy array (float64 kept), with a clear error else."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.ascontiguousarray(x))
    if not isinstance(x, torch.Tensor):
        raise DataError(f"{what}: expected a torch tensor or NumPy array; got "
                        f"{type(x).__name__}")
    if x.dtype == torch.bool or not x.is_floating_point():
        x = x.float()
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def infer_info(x: Any) -> DataInfo:
    """The :class:`DataInfo` of an array of examples ``(N, ...)`` (see the module docstring)."""
    x = as_float_tensor(x)
    if x.dim() < 2 or x.shape[0] == 0:
        raise DataError(f"data: expected examples along the first axis, (N, d) or (N, C, H, W); "
                        f"got shape {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise DataError("data: the array holds NaN or infinite values")
    shape = tuple(int(s) for s in x.shape[1:])
    if bool(((x == 0) | (x == 1)).all()):
        return DataInfo(shape=shape, kind="binary", low=0.0, high=1.0)
    if x.dim() == 2:
        return DataInfo(shape=shape, kind="vector")
    if x.dim() == 4:
        return DataInfo(shape=shape, kind="image", low=float(x.min()), high=float(x.max()))
    raise DataError(f"data: shape {tuple(x.shape)} is neither (N, d) vectors nor (N, C, H, W) "
                    "images; add a channel axis to images (x[:, None]) or flatten vectors")


def loaded_from_array(x: Any, test: Any = None) -> LoadedData:
    """``LoadedData`` over a user's array (and optional test array of the same shape)."""
    train = as_float_tensor(x)
    info = infer_info(train)
    test_t = None
    if test is not None:
        test_t = as_float_tensor(test, "test data")
        if tuple(test_t.shape[1:]) != info.shape:
            raise DataError(f"test data: examples of shape {tuple(test_t.shape[1:])}; the "
                            f"training data's are {info.shape}")
    return LoadedData(train=train.float(), info=info,
                      test=None if test_t is None else test_t.float())
