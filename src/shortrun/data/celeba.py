"""CelebA (Liu et al. 2015) at 64×64 from a folder of images (``img_align_celeba/*.jpg``).

Looked for in ``DIR/celeba/img_align_celeba``, ``DIR/img_align_celeba`` or ``DIR/celeba``.
Each image is centre-cropped to a square of its shorter side and resized to 64×64 (bicubic)
with Pillow, then scaled to [-1, 1]. Files are taken in sorted order: the first ``n_train``
are the training split (the LEBM paper uses 40,000), the next ``n_test`` the test split.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shortrun.data.base import DataInfo, DataOptions, LoadedData, resolve_data_dir
from shortrun.errors import DataError
from shortrun.fields import fld

WHERE = "https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html (img_align_celeba.zip)"
SUFFIXES = (".jpg", ".jpeg", ".png")


@dataclass
class CelebaOptions(DataOptions):
    name: str = fld("celeba64", choices=("celeba64",))
    n_train: int = fld(40_000, gt=0)
    n_test: int = fld(1_000, ge=0)
    size: int = fld(64, choices=(64,))


def find_folder(root: Path) -> Path:
    for path in (root / "celeba" / "img_align_celeba", root / "img_align_celeba",
                 root / "celeba"):
        if path.is_dir() and any(p.suffix.lower() in SUFFIXES for p in path.iterdir()):
            return path
    raise DataError(f"celeba64: no image folder in {root} (looked for celeba/img_align_celeba, "
                    f"img_align_celeba, celeba); unzip {WHERE} there")


def center_crop_resize(path: Path, size: int) -> np.ndarray:
    """Centre square crop of the shorter side, then resize to ``size``: ``(size, size, 3)``."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
            w, h = img.size
            s = min(w, h)
            left, top = (w - s) // 2, (h - s) // 2
            img = img.crop((left, top, left + s, top + s)).resize((size, size), Image.BICUBIC)
            return np.asarray(img, dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as exc:
        raise DataError(f"celeba64: cannot read image {path}: {exc}") from None


def load_celeba(options: CelebaOptions) -> LoadedData:
    from shortrun.data.svhn import to_model_space

    folder = find_folder(resolve_data_dir(options.data_dir, "celeba64"))
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in SUFFIXES)
    need = options.n_train + options.n_test
    if len(files) < need:
        raise DataError(f"celeba64: {folder} has {len(files)} images but data.n_train + "
                        f"data.n_test = {need}; lower them")
    arr = np.stack([center_crop_resize(p, options.size) for p in files[:need]])
    x = to_model_space(arr)
    info = DataInfo(shape=(3, options.size, options.size), kind="image", low=-1.0, high=1.0,
                    raw_scale=127.5, raw_offset=127.5)
    test = x[options.n_train:] if options.n_test else None
    return LoadedData(train=x[: options.n_train], test=test, info=info)
