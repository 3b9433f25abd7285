"""Networks of the latent-space EBM prior model (Pang, Han, Nijkamp, Zhu, Wu, NeurIPS 2020).

- Generators ``g_β: z ∈ R^nz → x``: transposed-convolution stacks ending in ``tanh`` (images in
  [-1, 1]), LeakyReLU(0.2), no BatchNorm, Xavier-normal init of every convolution weight, as
  in the authors' SVHN script (``_netG``). Three sizes: 28×28×1 (MNIST), 32×32×3 (SVHN,
  CIFAR-10; the official net) and 64×64×3 (CelebA).
- The prior's tilt ``f_α: R^nz → R``: an MLP nz → ndf → ndf → 1 with GELU (``_netE``), Linear
  layers keeping PyTorch's default init like the official script (its Xavier init touches only
  modules whose class name contains "Conv").
"""

from __future__ import annotations

import torch
from torch import nn

from shortrun.errors import ConfigError
from shortrun.speed.deconv import ImageLayer, LatentProjection
from shortrun.speed.layout import FORMATS

GENERATORS = ("auto", "mnist28", "svhn32", "celeba64")
SHAPES = {"mnist28": (1, 28, 28), "svhn32": (3, 32, 32), "celeba64": (3, 64, 64)}
ACTIVATIONS = {"gelu": nn.GELU, "lrelu": lambda: nn.LeakyReLU(0.2), "silu": nn.SiLU}


def _up(c_in: int, c_out: int, kernel: int = 4, stride: int = 2, pad: int = 1) -> list[nn.Module]:
    return [nn.ConvTranspose2d(c_in, c_out, kernel, stride, pad), nn.LeakyReLU(0.2)]


def _project(nz: int, c_out: int, kernel: int) -> list[nn.Module]:
    return [LatentProjection(nz, c_out, kernel, 1, 0), nn.LeakyReLU(0.2)]


def generator_layers(kind: str, nz: int, ngf: int) -> list[nn.Module]:
    """The layer list of generator ``kind`` for a ``(B, nz, 1, 1)`` input."""
    if kind == "mnist28":
        # 1 → 7 → 14 → 28: the DCGAN-style MNIST net used for the paper's anomaly protocol.
        return [*_project(nz, ngf * 4, 7), *_up(ngf * 4, ngf * 2),
                ImageLayer(ngf * 2, 1, 4, 2, 1), nn.Tanh()]
    if kind == "svhn32":
        # 1 → 4 → 8 → 16 → 32, exactly the official SVHN generator.
        return [*_project(nz, ngf * 8, 4), *_up(ngf * 8, ngf * 4), *_up(ngf * 4, ngf * 2),
                ImageLayer(ngf * 2, 3, 4, 2, 1), nn.Tanh()]
    if kind == "celeba64":
        # 1 → 4 → 8 → 16 → 32 → 64: the official net with one more doubling stage.
        return [*_project(nz, ngf * 8, 4), *_up(ngf * 8, ngf * 4), *_up(ngf * 4, ngf * 2),
                *_up(ngf * 2, ngf), ImageLayer(ngf, 3, 4, 2, 1), nn.Tanh()]
    raise ValueError(f"unknown generator {kind!r}")


def pick_generator(kind: str, shape: tuple[int, ...]) -> str:
    """Resolve ``model.generator: auto`` from the data shape; check an explicit choice fits."""
    if kind == "auto":
        for name, s in SHAPES.items():
            if tuple(shape) == s:
                return name
        raise ConfigError(f"model.generator: no LEBM generator for data of shape {tuple(shape)}; "
                          "supported shapes are 1x28x28, 3x32x32 and 3x64x64")
    if tuple(shape) != SHAPES[kind]:
        raise ConfigError(f"model.generator: {kind!r} makes images of shape {SHAPES[kind]} but "
                          f"the data has shape {tuple(shape)}; use model.generator=auto")
    return kind


class Generator(nn.Module):
    """``g_β(z)``: ``(B, nz)`` → ``(B, C, H, W)`` in [-1, 1].

    ``channels_last``: True/``"nhwc"`` runs the convolutions in NHWC, False/``"nchw"`` in NCHW
    (the same arithmetic up to rounding); ``"auto"``: NCHW until handed a layout by ``set_layout``
    (:func:`shortrun.speed.layout.settle_layouts` measures it). The generator never measures."""

    def __init__(self, kind: str, nz: int, ngf: int, channels_last: bool | str = False) -> None:
        super().__init__()
        self.kind, self.nz, self.ngf = kind, nz, ngf
        self.net = nn.Sequential(*generator_layers(kind, nz, ngf))
        for m in self.modules():
            if isinstance(m, nn.ConvTranspose2d):
                nn.init.xavier_normal_(m.weight)
        self.layout, self.memory_format = None, torch.contiguous_format  # auto: none handed yet
        if channels_last != "auto":
            self.set_layout({True: "nhwc", False: "nchw"}.get(channels_last, channels_last))

    def set_layout(self, layout: str) -> None:
        """Run the convolutions in ``nchw`` or ``nhwc`` from now on (parameters keep their
        values and identity, so optimisers are unaffected)."""
        if layout not in FORMATS:
            raise ConfigError(f"Generator layout {layout!r}: use 'nchw' or 'nhwc'")
        self.memory_format, self.layout = FORMATS[layout], layout
        self.net.to(memory_format=self.memory_format)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        z = z.reshape(z.shape[0], self.nz, 1, 1)
        return self.net(z.contiguous(memory_format=self.memory_format))


class PriorTilt(nn.Module):
    """``f_α(z)``, the negative energy that tilts the Gaussian reference (paper Eq. 1)."""

    def __init__(self, nz: int, ndf: int, act: str = "gelu") -> None:
        super().__init__()
        make = ACTIVATIONS[act]
        self.net = nn.Sequential(nn.Linear(nz, ndf), make(), nn.Linear(ndf, ndf), make(),
                                 nn.Linear(ndf, 1))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z.reshape(z.shape[0], -1)).squeeze(-1)
