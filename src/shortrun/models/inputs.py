"""Input checks for the models' public methods: shape, dtype and scale, with what was expected.

Models work in model space (images in ``[-1, 1]``, binary data in ``{0, 1}``, see
:class:`~shortrun.data.base.DataInfo`); data in its own scale (uint8 0-255, 0-16 digits) is
mapped there with ``model.info.to_model_scale(x)``. Without these checks a ``(B, 28, 28)``
batch broadcasts against ``(B, 1, 28, 28)`` and uint8 pixels give scores near 2e7.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import torch

from shortrun.data.base import DataInfo
from shortrun.errors import InputError

# out-of-range tolerance, as a fraction of the model's range (samplers may overshoot slightly)
RANGE_SLACK = 0.01
MAP_HINT = "map data in its own scale with model.info.to_model_scale(x)"


def _fmt(v: float) -> str:
    return f"{v:g}"


def expected(info: DataInfo, flat_ok: bool = False) -> str:
    """``(B, 1, 28, 28) float in [-1, 1] (the model's scale)``: what a batch should be."""
    shape = "(B, " + ", ".join(str(s) for s in info.shape) + ")"
    if flat_ok and len(info.shape) > 1:
        shape += f" or (B, {info.dim})"
    if info.kind == "text":
        return f"{shape} integer token ids"
    if info.kind == "binary":
        return f"{shape} float in [0, 1] (the model's scale: binary data)"
    if math.isfinite(info.low) and math.isfinite(info.high):
        return f"{shape} float in [{_fmt(info.low)}, {_fmt(info.high)}] (the model's scale)"
    return f"{shape} float"


def _shape_hint(got: tuple[int, ...], shape: tuple[int, ...]) -> str:
    if got == shape:
        return "; one example? add the batch axis: x[None]"
    if len(shape) >= 2 and shape[0] == 1 and got[1:] == shape[1:]:
        return "; add the channel axis: x[:, None]"
    return ""


def _shown(got: tuple[int, ...]) -> str:
    if len(got) < 2:
        return f"shape {got}"
    return "(B, " + ", ".join(str(s) for s in got[1:]) + ")"


def check_batch(x: Any, info: DataInfo, what: str, *, device: torch.device | None = None,
                flat_ok: bool = False) -> torch.Tensor:
    """``x`` as a tensor of ``B`` examples in the model's space, or an :class:`InputError` (a
    ``ValueError``) that says what was expected.

    Takes torch tensors and NumPy arrays (converted; float64 arrays become the default float
    dtype). Checks that the trailing shape is ``info.shape`` (or ``(info.dim,)`` when
    ``flat_ok``), refuses integer dtypes (uint8 pixels) except for token ids and 0/1 binary
    data, and refuses values outside the model's range by more than ``RANGE_SLACK``."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.ascontiguousarray(x))
        if x.dtype == torch.float64:
            x = x.to(torch.get_default_dtype())
    elif not isinstance(x, torch.Tensor):
        raise InputError(f"{what}: expected a torch.Tensor or numpy.ndarray, "
                        f"{expected(info, flat_ok)}; got {type(x).__name__}")
    got, shape = tuple(x.shape), tuple(info.shape)
    shape_ok = got[1:] == shape or (flat_ok and got[1:] == (info.dim,))
    if not shape_ok:
        raise InputError(f"{what}: expected {expected(info, flat_ok)}; got {_shown(got)}"
                         f"{_shape_hint(got, shape)}")
    if info.kind == "text":
        if x.is_floating_point() or x.dtype == torch.bool:
            raise InputError(f"{what}: expected {expected(info)}; got dtype {x.dtype}")
        return x if device is None else x.to(device)
    if x.dtype == torch.bool or not (x.is_floating_point() or x.is_complex()):
        if info.kind != "binary":
            raise InputError(f"{what}: expected {expected(info, flat_ok)}; got dtype {x.dtype}: "
                             f"{MAP_HINT}")
        x = x.to(torch.get_default_dtype())
    if x.is_complex():
        raise InputError(f"{what}: expected {expected(info, flat_ok)}; got dtype {x.dtype}")
    if x.numel():
        _check_range(x, info, what, flat_ok)
    return x if device is None else x.to(device)


def _check_range(x: torch.Tensor, info: DataInfo, what: str, flat_ok: bool) -> None:
    lo, hi = float(x.min()), float(x.max())
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise InputError(f"{what}: the input holds NaN or infinite values; expected "
                         f"{expected(info, flat_ok)}")
    if not (math.isfinite(info.low) and math.isfinite(info.high)):
        return
    slack = RANGE_SLACK * (info.high - info.low)
    if lo >= info.low - slack and hi <= info.high + slack:
        return
    fix = ("binarize it first, e.g. (x >= threshold).float(), or use a real-valued model (grbm)"
           if info.kind == "binary" else MAP_HINT)
    raise InputError(f"{what}: expected {expected(info, flat_ok)}; got values in "
                     f"[{_fmt(lo)}, {_fmt(hi)}]: {fix}")


def check_sample_args(n: Any, steps: Any = None, generator: Any = None,
                      what: str = "sample") -> None:
    """``n`` a positive integer, ``steps`` a positive integer or None, ``generator`` a
    ``torch.Generator`` or None."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise InputError(f"{what}: n (how many samples) must be a positive integer; got {n!r}")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, numbers.Integral)
                              or steps < 1):
        raise InputError(f"{what}: steps must be a positive integer (chain length) or None for "
                         f"the model's default; got {steps!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise InputError(f"{what}: generator must be a torch.Generator or None; got "
                        f"{type(generator).__name__} (use torch.Generator().manual_seed(seed))")
