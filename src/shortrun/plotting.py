"""Pictures: sample grids for images, scatter + energy heat map for 2-D data."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from shortrun.extras import require


class ValueRange(Protocol):
    """What drawing needs to know of the data (``shortrun.data.DataInfo`` has it)."""

    low: float
    high: float
    shape: tuple[int, ...]


def to_uint8_grid(x: torch.Tensor, info: ValueRange, nrow: int | None = None,
                  pad: int = 1) -> np.ndarray:
    """``(B, C, H, W)`` in ``[info.low, info.high]`` → one ``(H', W', C)`` uint8 mosaic."""
    x = x.detach().float().cpu()
    if x.dim() == 2:
        side = int(math.isqrt(x.shape[1]))
        x = x.reshape(-1, 1, side, side)
    lo, hi = (info.low, info.high) if math.isfinite(info.low) else (x.min(), x.max())
    x = ((x - lo) / max(float(hi - lo), 1e-8)).clamp(0, 1)
    b, c, h, w = x.shape
    nrow = nrow or max(1, int(math.ceil(math.sqrt(b))))
    ncol = int(math.ceil(b / nrow))
    grid = torch.ones(c, ncol * (h + pad) + pad, nrow * (w + pad) + pad)
    for i in range(b):
        r, q = divmod(i, nrow)
        grid[:, pad + r * (h + pad): pad + r * (h + pad) + h,
             pad + q * (w + pad): pad + q * (w + pad) + w] = x[i]
    arr = (grid.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    return arr[:, :, 0] if c == 1 else arr


def save_grid(x: torch.Tensor, info: ValueRange, path: Path, scale: int = 0) -> None:
    from PIL import Image

    arr = to_uint8_grid(x, info)
    img = Image.fromarray(arr)
    scale = scale or max(1, 256 // max(arr.shape[0], 1) + 1)
    if scale > 1:
        img = img.resize((img.width * scale, img.height * scale), Image.NEAREST)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    img.save(path)


def save_samples(x: torch.Tensor, info: ValueRange, path: Path) -> None:
    if info.shape == (2,):
        save_scatter_2d(x, path)
    else:
        save_grid(x, info, path)


def pyplot(needed_for: str = "2-D pictures"):
    """matplotlib's ``pyplot`` on the file-only Agg backend; matplotlib is the ``plots`` extra,
    so a missing one raises :class:`~shortrun.errors.MissingExtraError` naming it."""
    matplotlib = require("matplotlib", needed_for)
    matplotlib.use("Agg")
    return require("matplotlib.pyplot", needed_for)


def save_scatter_2d(x: torch.Tensor, path: Path, half_width: float | None = None) -> None:
    plt = pyplot()
    x = x.detach().cpu().numpy()
    w = half_width or float(np.abs(x).max()) * 1.05
    fig, ax = plt.subplots(figsize=(4, 4), dpi=100)
    ax.scatter(x[:, 0], x[:, 1], s=1, alpha=0.5)
    ax.set_xlim(-w, w)
    ax.set_ylim(-w, w)
    ax.set_aspect("equal")
    ax.set_title(f"{len(x)} samples")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
