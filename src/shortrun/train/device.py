"""``train.device``: checked before any work, so a wrong name is one line, not a traceback."""

from __future__ import annotations

import torch

from shortrun.errors import ConfigError
from shortrun.hardware import require_native_bf16


def resolve_device(name: str) -> torch.device:
    """``train.device`` as a torch device this build can use; otherwise a one-line ConfigError."""
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ConfigError(f"train.device={name!r} is not a device; use cpu, cuda, cuda:N or "
                          "mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        why = ("this torch build has no CUDA" if torch.version.cuda is None
               else "no CUDA GPU is visible")
        raise ConfigError(f"train.device={name}: {why} (torch {torch.__version__}); use "
                          "train.device=cpu or install a CUDA build of torch on a GPU machine")
    if device.type == "cuda" and device.index is not None \
            and device.index >= torch.cuda.device_count():
        raise ConfigError(f"train.device={name}: only {torch.cuda.device_count()} CUDA "
                          "device(s) here; use cuda:0 .. cuda:N-1")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"train.device={name}: MPS is not available here; use cpu")
    return device


def check_precision(precision: str, device: torch.device) -> None:
    """``train.precision=bf16`` only where ``device`` has bf16 natively: emulated bf16
    is slower than fp32, so it is refused with a one-line ConfigError naming what is missing."""
    if precision == "bf16":
        require_native_bf16(device)
