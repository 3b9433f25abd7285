"""A user's own tensor, NumPy array or ``.npz`` file as a dataset (``data.name: array`` / ``npz``).

The data's own scale (uint8 pixels 0-255, 0-16 digit intensities, raw coordinates) is mapped
linearly onto the model's: images onto ``[-1, 1]``, binary data kept as ``{0, 1}``, vectors left
as they are unless a range is declared. The map is recorded in :class:`DataInfo`
(``raw_scale``, ``raw_offset``) so that ``info.to_data_scale`` gives samples back in the data's
scale and ``info.to_model_scale`` maps new data in.

``.npz`` keys: ``x_train`` (or a single ``x``), optional ``x_test``, ``y_train``, ``y_test``.
A file that shortrun wrote itself (``RUN_DIR/data.npz``) also holds ``shortrun_info``, the
:class:`DataInfo` as JSON; its arrays are already in model space and are used as they are.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from shortrun.data.base import DataInfo, DataOptions, LoadedData
from shortrun.errors import DataError
from shortrun.fields import fld

NPZ_ENV = "SHORTRUN_NPZ"
KINDS = ("auto", "vector", "image", "binary")
INFO_KEY = "shortrun_info"
# 8-bit pixels: integer data whose maximum lies above this is taken to span 0-255
BYTE_LIKE = 127


@dataclass
class ArrayOptions(DataOptions):
    name: str = fld("array", choices=("array",))
    kind: str = fld("auto", choices=KINDS,
                    doc="vector (N, D), image (N, C, H, W) or binary {0,1}; auto: guess")
    low: float | None = fld(None, doc="smallest value in the data's own scale; default: detected")
    high: float | None = fld(None, doc="largest value in the data's own scale; default: detected")
    binarize: float | None = fld(None, doc="threshold in the data's own scale: x >= t is 1 "
                                           "(gives kind binary, for binary RBMs)")


@dataclass
class NpzOptions(ArrayOptions):
    name: str = fld("npz", choices=("npz",))
    path: str | None = fld(None, doc=f"the .npz file (keys x_train or x, optional x_test, "
                                     f"y_train, y_test); default ${NPZ_ENV}")


def as_tensor(x: Any, what: str = "data") -> torch.Tensor:
    """A torch tensor from a tensor or NumPy array (not copied where it can be avoided)."""
    if isinstance(x, torch.Tensor):
        return x.detach()
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x))
    raise DataError(f"{what}: expected a torch.Tensor or numpy.ndarray; got {type(x).__name__}")


def image_layout(x: torch.Tensor) -> torch.Tensor:
    """(N, H, W) gains a channel axis; (N, H, W, C) with C in 1/3/4 becomes (N, C, H, W)."""
    if x.dim() == 3:
        return x[:, None]
    if x.dim() == 4 and x.shape[-1] in (1, 3, 4) and x.shape[1] not in (1, 3, 4):
        return x.permute(0, 3, 1, 2).contiguous()
    return x


def _is_binary(x: torch.Tensor) -> bool:
    return x.dtype == torch.bool or bool(((x == 0) | (x == 1)).all())


def _detected_range(x: torch.Tensor, kind: str) -> tuple[float, float] | None:
    """The data's own range when none is declared (``None``: leave vectors unscaled)."""
    if x.dtype == torch.uint8:
        return 0.0, 255.0
    if kind == "vector":
        return None
    lo, hi = float(x.min()), float(x.max())
    if lo >= 0 and hi <= 1:
        return 0.0, 1.0
    if lo >= -1 and hi <= 1:
        return -1.0, 1.0
    integer = not x.is_floating_point() or bool((x == x.round()).all())
    if integer and lo >= 0:
        return 0.0, (255.0 if BYTE_LIKE < hi <= 255 else hi)
    return lo, hi


def infer_info(x: Any, kind: str = "auto", low: float | None = None,
               high: float | None = None) -> DataInfo:
    """The :class:`DataInfo` of ``x`` (N examples in channels-first layout) once mapped to the
    model's scale: its kind, shape and the linear map from the data's scale.

    ``kind="auto"`` picks binary when every value is 0 or 1, image for (N, C, H, W), vector for
    (N, D). Images and declared ranges go onto ``[-1, 1]``; the data's range is ``low``/``high``
    if given, else detected (uint8: 0-255; within [0, 1] or [-1, 1]: that; non-negative integers:
    0 to the maximum, or 0-255 above 127; otherwise min to max)."""
    x = as_tensor(x)
    if kind not in KINDS:
        raise DataError(f"data.kind: must be one of {', '.join(KINDS)}; got {kind!r}")
    if x.dim() < 2 or len(x) == 0:
        raise DataError(f"data: expected N examples, e.g. (N, D) vectors or (N, C, H, W) images; "
                        f"got shape {tuple(x.shape)}")
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise DataError("data: holds NaN or infinite values; remove or impute them first")
    shape = tuple(x.shape[1:])
    if kind == "auto":
        if _is_binary(x):
            kind = "binary"
        elif len(shape) in (1, 3):
            kind = "vector" if len(shape) == 1 else "image"
        else:
            raise DataError(f"data.kind: cannot tell the kind of examples shaped {shape}; pass "
                            "(N, D) vectors or (N, C, H, W) images, or set data.kind")
    if kind == "binary":
        if not _is_binary(x):
            lo, hi = float(x.min()), float(x.max())
            raise DataError(f"data.kind: binary, but the values span [{lo:g}, {hi:g}], not "
                            "{0, 1}: set data.binarize=THRESHOLD (in the data's scale, e.g. 8 "
                            "for 0-16 digits) or data.kind=image with a real-valued model (grbm)")
        return DataInfo(shape=shape, kind="binary", low=0.0, high=1.0)
    if kind == "image" and len(shape) != 3:
        raise DataError(f"data.kind: image needs (N, C, H, W) examples; got {tuple(x.shape)} "
                        "(add a channel axis: x[:, None])")
    detected = _detected_range(x, kind)
    if detected is None and low is None and high is None:
        return DataInfo(shape=shape, kind=kind)
    d_lo, d_hi = detected if detected is not None else (float(x.min()), float(x.max()))
    lo = float(low) if low is not None else d_lo
    hi = float(high) if high is not None else d_hi
    if not hi > lo:
        raise DataError(f"data.low/high: the range [{lo:g}, {hi:g}] is empty; the data is "
                        "constant or the bounds are swapped")
    x_lo, x_hi = float(x.min()), float(x.max())
    if x_lo < lo or x_hi > hi:
        raise DataError(f"data.low/high: values span [{x_lo:g}, {x_hi:g}], outside the declared "
                        f"[{lo:g}, {hi:g}]; widen data.low/high or leave them unset")
    return DataInfo(shape=shape, kind=kind, low=-1.0, high=1.0,
                    raw_scale=(hi - lo) / 2, raw_offset=(hi + lo) / 2)


def _prepare(x: Any, what: str, binarize: float | None) -> torch.Tensor:
    x = image_layout(as_tensor(x, what))
    if binarize is not None:
        x = x >= binarize
    return x


def _labels(y: Any, n: int, what: str) -> torch.Tensor | None:
    if y is None:
        return None
    y = as_tensor(y if isinstance(y, torch.Tensor) else np.asarray(y), what).long().reshape(-1)
    if len(y) != n:
        raise DataError(f"{what}: {len(y)} labels for {n} examples; give one label per example")
    return y


def array_data(x: Any, x_test: Any = None, y_train: Any = None, y_test: Any = None, *,
               kind: str = "auto", low: float | None = None, high: float | None = None,
               binarize: float | None = None) -> LoadedData:
    """A :class:`LoadedData` from the user's arrays, in the model's scale (see the module doc).

    ``x``: (N, D) vectors, (N, C, H, W) images, (N, H, W) images (a channel axis is added) or
    (N, H, W, C) images with C in 1/3/4 (moved to channels-first). ``x_test`` is mapped with
    the map inferred from ``x``. ``binarize`` thresholds in the data's own scale first."""
    if binarize is not None and kind not in ("auto", "binary"):
        raise DataError(f"data.binarize gives binary data; it contradicts data.kind={kind!r}")
    train = _prepare(x, "x_train", binarize)
    info = infer_info(train, "binary" if binarize is not None else kind, low, high)
    test = None
    if x_test is not None:
        test = _prepare(x_test, "x_test", binarize)
        if tuple(test.shape[1:]) != info.shape:
            raise DataError(f"x_test: examples shaped {tuple(test.shape[1:])}, but x_train's are "
                            f"{info.shape}; give both the same layout")
        if info.kind == "binary" and not _is_binary(test):
            raise DataError("x_test: values are not all 0 or 1 although x_train's are; set "
                            "data.binarize or data.kind=image")
    dtype = torch.get_default_dtype()
    loaded = LoadedData(train=info.to_model_scale(train).to(dtype), info=info,
                        test=None if test is None else info.to_model_scale(test).to(dtype),
                        train_labels=_labels(y_train, len(train), "y_train"))
    if test is not None:
        loaded.test_labels = _labels(y_test, len(test), "y_test")
    return loaded


def check_loaded(data: LoadedData) -> None:
    """Refuse a hand-built :class:`LoadedData` whose tensors contradict its ``info``."""
    train, info = data.train, data.info
    if tuple(train.shape[1:]) != tuple(info.shape):
        raise DataError(f"data: train examples are shaped {tuple(train.shape[1:])} but "
                        f"info.shape is {tuple(info.shape)}; make them agree")
    if info.kind == "binary" and not _is_binary(train):
        lo, hi = float(train.min()), float(train.max())
        raise DataError(f"data: info.kind is 'binary' but the values span [{lo:g}, {hi:g}], not "
                        "{0, 1}; threshold them ((x >= t).float(), or data.binarize) or use "
                        "kind 'image' with a real-valued model (grbm)")


def load_array(options: ArrayOptions) -> LoadedData:
    raise DataError("data.name: array takes its array from Python (shortrun.data.array."
                    "array_data(x) or a Trainer's data=); from a recipe or the command line "
                    "use data.name=npz with data.path=FILE.npz")


def npz_path(options: NpzOptions) -> Path:
    chosen = options.path or os.environ.get(NPZ_ENV)
    if not chosen:
        raise DataError(f"data.name: npz needs a file: set data.path=FILE.npz or "
                        f"{NPZ_ENV}=FILE.npz")
    path = Path(chosen).expanduser()
    if not path.is_file():
        raise DataError(f"data.path: {str(path)!r} does not exist; give an .npz file with key "
                        "x_train (or x)")
    return path


def load_npz(options: NpzOptions) -> LoadedData:
    path = npz_path(options)
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except (OSError, ValueError) as exc:
        raise DataError(f"data.path: {str(path)!r} is not a readable .npz file ({exc})") from None
    if "x_train" not in arrays and "x" not in arrays:
        raise DataError(f"data.path: {str(path)!r} has keys {', '.join(sorted(arrays))}; it needs "
                        "x_train (or x), optionally x_test, y_train, y_test")
    x = arrays.get("x_train", arrays.get("x"))
    if INFO_KEY in arrays:  # written by shortrun: already in model space
        info = DataInfo.from_dict(json.loads(str(arrays[INFO_KEY])))
        test = arrays.get("x_test")
        return LoadedData(train=torch.from_numpy(x), info=info,
                          test=None if test is None else torch.from_numpy(test),
                          train_labels=_labels(arrays.get("y_train"), len(x), "y_train"),
                          test_labels=(None if test is None else
                                       _labels(arrays.get("y_test"), len(test), "y_test")))
    return array_data(x, arrays.get("x_test"), arrays.get("y_train"), arrays.get("y_test"),
                      kind=options.kind, low=options.low, high=options.high,
                      binarize=options.binarize)


def save_npz(data: LoadedData, path: Path) -> Path:
    """Write ``data`` (model space) and its info so that :func:`load_npz` gives it back exactly."""
    def plain(t: torch.Tensor) -> np.ndarray:
        return t.detach().cpu().contiguous().numpy()

    arrays: dict[str, np.ndarray] = {"x_train": plain(data.train),
                                     INFO_KEY: np.array(json.dumps(data.info.to_dict()))}
    for key, t in (("x_test", data.test), ("y_train", data.train_labels),
                   ("y_test", data.test_labels)):
        if t is not None:
            arrays[key] = plain(t)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)
    return path
