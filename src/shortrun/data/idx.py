"""Reader for the idx format of MNIST and Fashion-MNIST (LeCun et al.), gzipped or not."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from shortrun.errors import DataError

_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: Path) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: cannot read idx file ({exc}); re-download it") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _DTYPES:
        raise DataError(f"{path}: not an idx file (bad magic number)")
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    dtype = np.dtype(_DTYPES[data[2]])
    expected = int(np.prod(dims)) * dtype.itemsize
    body = data[4 + 4 * ndim :]
    if len(body) != expected:
        raise DataError(f"{path}: truncated idx file ({len(body)} of {expected} bytes)")
    return np.frombuffer(body, dtype=dtype).reshape(dims).astype(dtype.newbyteorder("="))
