"""The FID Inception-v3 network in plain torch, loaded from a local weights file.

FID (Heusel et al. 2017) is defined with the 2048-d pool features of the TensorFlow
Inception-v3 graph ``inception-2015-12-05``. pytorch-fid and torch-fidelity ship that graph's
weights as ``pt_inception-2015-12-05-6726825d.pth`` (a state dict of torchvision's Inception3
layout with 1008 classes and no aux head). This module rebuilds the same layout (Szegedy et al.
2016, "Rethinking the Inception Architecture", Fig. 5-7 blocks) *with the FID graph's quirks*:

- the average pools inside the A, C and first E blocks exclude the zero padding
  (``count_include_pad=False``, TensorFlow's behaviour);
- the last E block (``Mixed_7c``) pools its branch with a *max* pool, not an average pool;
- inputs in ``[0, 1]`` are resized to 299×299 (bilinear) and mapped to ``[-1, 1]``.

The weights are never downloaded: the user supplies the file (docs/evaluation.md says where to
get it). It is read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from shortrun.errors import DataError

WEIGHTS_NAME = "pt_inception-2015-12-05-6726825d.pth"
WEIGHTS_URL = ("https://github.com/mseitzer/pytorch-fid/releases/download/fid_weights/"
               + WEIGHTS_NAME)
FEATURE_DIM = 2048


class BasicConv2d(nn.Module):
    """conv (no bias) → BatchNorm(eps=1e-3) → ReLU, torchvision's naming (``conv``, ``bn``)."""

    def __init__(self, c_in: int, c_out: int, **kwargs) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(c_out, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


def _tf_avg_pool(x: torch.Tensor) -> torch.Tensor:
    # TensorFlow's 'SAME' average pool divides by the number of real (unpadded) inputs.
    return F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)


class InceptionA(nn.Module):
    def __init__(self, c_in: int, pool_features: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(c_in, 64, kernel_size=1)
        self.branch5x5_1 = BasicConv2d(c_in, 48, kernel_size=1)
        self.branch5x5_2 = BasicConv2d(48, 64, kernel_size=5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(c_in, 64, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, padding=1)
        self.branch_pool = BasicConv2d(c_in, pool_features, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([self.branch1x1(x), b5, b3, self.branch_pool(_tf_avg_pool(x))], 1)


class InceptionB(nn.Module):
    def __init__(self, c_in: int) -> None:
        super().__init__()
        self.branch3x3 = BasicConv2d(c_in, 384, kernel_size=3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(c_in, 64, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([self.branch3x3(x), b3, F.max_pool2d(x, 3, stride=2)], 1)


class InceptionC(nn.Module):
    def __init__(self, c_in: int, c7: int) -> None:
        super().__init__()
        row, col = {"kernel_size": (1, 7), "padding": (0, 3)}, {"kernel_size": (7, 1),
                                                                 "padding": (3, 0)}
        self.branch1x1 = BasicConv2d(c_in, 192, kernel_size=1)
        self.branch7x7_1 = BasicConv2d(c_in, c7, kernel_size=1)
        self.branch7x7_2 = BasicConv2d(c7, c7, **row)
        self.branch7x7_3 = BasicConv2d(c7, 192, **col)
        self.branch7x7dbl_1 = BasicConv2d(c_in, c7, kernel_size=1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, **col)
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, **row)
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, **col)
        self.branch7x7dbl_5 = BasicConv2d(c7, 192, **row)
        self.branch_pool = BasicConv2d(c_in, 192, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        d = self.branch7x7dbl_1(x)
        for layer in (self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4,
                      self.branch7x7dbl_5):
            d = layer(d)
        return torch.cat([self.branch1x1(x), b7, d, self.branch_pool(_tf_avg_pool(x))], 1)


class InceptionD(nn.Module):
    def __init__(self, c_in: int) -> None:
        super().__init__()
        self.branch3x3_1 = BasicConv2d(c_in, 192, kernel_size=1)
        self.branch3x3_2 = BasicConv2d(192, 320, kernel_size=3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(c_in, 192, kernel_size=1)
        self.branch7x7x3_2 = BasicConv2d(192, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192, 192, kernel_size=3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return torch.cat([b3, b7, F.max_pool2d(x, 3, stride=2)], 1)


class InceptionE(nn.Module):
    """``max_pool=True`` is the FID graph's ``Mixed_7c`` (max pool in the pool branch)."""

    def __init__(self, c_in: int, max_pool: bool = False) -> None:
        super().__init__()
        self.max_pool = max_pool
        self.branch1x1 = BasicConv2d(c_in, 320, kernel_size=1)
        self.branch3x3_1 = BasicConv2d(c_in, 384, kernel_size=1)
        self.branch3x3_2a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(c_in, 448, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, kernel_size=3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(c_in, 192, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(s), self.branch3x3_2b(s)], 1)
        d = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = torch.cat([self.branch3x3dbl_3a(d), self.branch3x3dbl_3b(d)], 1)
        pooled = F.max_pool2d(x, 3, stride=1, padding=1) if self.max_pool else _tf_avg_pool(x)
        return torch.cat([self.branch1x1(x), b3, bd, self.branch_pool(pooled)], 1)


class FIDInceptionV3(nn.Module):
    """Images ``(B, 1 or 3, H, W)`` in ``[0, 1]`` → ``(B, 2048)`` pool features."""

    def __init__(self) -> None:
        super().__init__()
        self.Conv2d_1a_3x3 = BasicConv2d(3, 32, kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(32, 32, kernel_size=3)
        self.Conv2d_2b_3x3 = BasicConv2d(32, 64, kernel_size=3, padding=1)
        self.Conv2d_3b_1x1 = BasicConv2d(64, 80, kernel_size=1)
        self.Conv2d_4a_3x3 = BasicConv2d(80, 192, kernel_size=3)
        self.Mixed_5b = InceptionA(192, pool_features=32)
        self.Mixed_5c = InceptionA(256, pool_features=64)
        self.Mixed_5d = InceptionA(288, pool_features=64)
        self.Mixed_6a = InceptionB(288)
        self.Mixed_6b = InceptionC(768, c7=128)
        self.Mixed_6c = InceptionC(768, c7=160)
        self.Mixed_6d = InceptionC(768, c7=160)
        self.Mixed_6e = InceptionC(768, c7=192)
        self.Mixed_7a = InceptionD(768)
        self.Mixed_7b = InceptionE(1280)
        self.Mixed_7c = InceptionE(2048, max_pool=True)
        self.fc = nn.Linear(FEATURE_DIM, 1008)  # unused for FID; present so the file loads 1:1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] == 1:  # grayscale: the usual FID practice is to repeat the channel
            x = x.expand(-1, 3, -1, -1)
        x = F.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False)
        x = 2 * x - 1
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = F.max_pool2d(x, 3, stride=2)
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x))
        x = F.max_pool2d(x, 3, stride=2)
        for name in ("5b", "5c", "5d", "6a", "6b", "6c", "6d", "6e", "7a", "7b", "7c"):
            x = getattr(self, f"Mixed_{name}")(x)
        return F.adaptive_avg_pool2d(x, 1).flatten(1)


def missing_weights_message(path: Path) -> str:
    return (f"FID Inception weights not found at {str(path)!r}: download {WEIGHTS_NAME} once "
            f"from {WEIGHTS_URL} (the file pytorch-fid and torch-fidelity use) on a machine with "
            f"internet, copy it here and pass eval.extractor=inception:PATH; shortrun never "
            f"downloads it")


def load_fid_inception(path: str | Path) -> FIDInceptionV3:
    """Build the network and load the user's weights file; every failure is a DataError."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(missing_weights_message(path))
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file can raise almost anything
        raise DataError(f"{path} is not a readable weights file ({type(exc).__name__}); get "
                        f"a fresh copy of {WEIGHTS_NAME} from {WEIGHTS_URL}") from None
    net = FIDInceptionV3()
    if not isinstance(state, dict):
        raise DataError(f"{path} does not hold a state dict; expected {WEIGHTS_NAME}")
    expected = net.state_dict()
    # Files saved before PyTorch 0.4.1 carry no BatchNorm step counters; those are unused here.
    missing = [k for k in expected if k not in state and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state if k not in expected]
    wrong = [k for k in expected if k in state and tuple(state[k].shape)
             != tuple(expected[k].shape)]
    if missing or unexpected or wrong:
        first = (missing or unexpected or wrong)[0]
        raise DataError(f"{path} is not the FID Inception weights file ({len(missing)} missing, "
                        f"{len(unexpected)} unexpected, {len(wrong)} mis-shaped keys, e.g. "
                        f"{first!r}); expected {WEIGHTS_NAME}")
    net.load_state_dict({**expected, **state})
    return net.eval()


def load_inception_extractor(path: str):
    """:class:`~shortrun.metrics.features.Extractor` for ``inception:PATH`` (2048-d)."""
    from shortrun.data.base import DataInfo
    from shortrun.metrics.features import Extractor

    net = load_fid_inception(path)
    info = DataInfo(shape=(3, 299, 299), kind="image", low=0.0, high=1.0, raw_scale=255.0)
    return Extractor(f"inception:{path}", net, FEATURE_DIM, info, channels=3)
