"""Networks of Dual-MCMC teaching (Cui & Han, NeurIPS 2023, §4 and App. B).

- :class:`ResNetEnergy` — the data-space energy ``E_α(x)`` (the paper's ``−f_α(x)``): a ResNet
  of residual down-blocks *without* BatchNorm (BatchNorm would couple the chains of a batch and
  make ``E`` a function of the batch, not of one image), optional spectral norm.
- :class:`ResGenerator` — the generator mean ``g_θ(z)`` with residual up-blocks, ``tanh`` out.
- :class:`GaussianEncoder` — the inference network ``q_φ(z|x) = N(μ_φ(x), diag exp(ℓ_φ(x)))``,
  returning the mean and the log-variance.

One table, :data:`LAYOUTS`, says how each supported image size is reached: 28×28×1 (MNIST,
Fashion), 32×32×3 (CIFAR-10) and 64×64×3 (CelebA-64).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from shortrun.errors import ConfigError

# (C, H, W) -> (generator bottom width, up-blocks, encoder down-convs, energy down-blocks)
LAYOUTS: dict[tuple[int, int, int], tuple[int, int, int, int]] = {
    (1, 28, 28): (7, 2, 2, 2),
    (3, 32, 32): (4, 3, 3, 2),
    (3, 64, 64): (4, 4, 4, 3),
}


def layout(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The layout row for an image shape; a clear error for anything else."""
    shape = tuple(int(s) for s in shape)
    if shape not in LAYOUTS:
        known = ", ".join("×".join(map(str, (h, w, c))) for c, h, w in LAYOUTS)
        raise ConfigError(f"model dual_mcmc: data of shape {shape} is not supported; the "
                          f"networks exist for images of {known} (H×W×C). Pick data.name "
                          "mnist, fashion, cifar10 or celeba64")
    return LAYOUTS[shape]


def xavier_init(module: nn.Module) -> None:
    """Xavier-normal weights for every conv, as in the paper's released networks."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.xavier_normal_(m.weight)


# ----------------------------------------------------------------------------- energy


class _DownBlock(nn.Module):
    """Residual block ``h = conv(relu(conv(pre(x))))`` + (1×1) shortcut, avg-pool if ``down``.

    ``first`` skips the pre-activation on the raw image (the input block of the ResNet)."""

    def __init__(self, c_in: int, c_out: int, down: bool, first: bool = False) -> None:
        super().__init__()
        self.down, self.first = down, first
        self.conv1 = nn.Conv2d(c_in, c_out, 3, 1, 1, bias=False)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.shortcut = (nn.Conv2d(c_in, c_out, 1, bias=False)
                         if (c_in != c_out or down) else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x if self.first else F.relu(x)
        h = self.conv2(F.relu(self.conv1(h)))
        y = x
        if self.first and self.down:  # pool first on the image, then project (cheaper)
            y = F.avg_pool2d(y, 2)
        if self.shortcut is not None:
            y = self.shortcut(y)
        if self.down:
            h = F.avg_pool2d(h, 2)
            if not self.first:
                y = F.avg_pool2d(y, 2)
        return h + y


class ResNetEnergy(nn.Module):
    """``E(x)``: ``n_down`` down-blocks, two plain blocks, ReLU, global mean, linear → ``(B,)``.

    No BatchNorm anywhere, so ``E(x_i)`` depends on ``x_i`` alone and the x-chain's summed
    gradient is exactly each chain's own gradient."""

    def __init__(self, shape: tuple[int, ...], channels: int = 64,
                 spectral_norm: bool = False) -> None:
        super().__init__()
        _, _, _, n_down = layout(shape)
        c = shape[0]
        blocks: list[nn.Module] = [_DownBlock(c, channels, down=True, first=True)]
        blocks += [_DownBlock(channels, channels, down=True) for _ in range(n_down - 1)]
        blocks += [_DownBlock(channels, channels, down=False) for _ in range(2)]
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(channels, 1, bias=False)
        xavier_init(self)
        if spectral_norm:
            for m in list(self.modules()):
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    nn.utils.parametrizations.spectral_norm(m)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.blocks(x))
        return self.head(h.mean(dim=(2, 3))).squeeze(1)


# ----------------------------------------------------------------------------- generator


class _UpBlock(nn.Module):
    """Residual up-block: ``conv(act(norm(conv(up(act(norm(x)))))))`` + up(1×1 shortcut),
    nearest-neighbour upsampling (the released net uses bilinear, 3× slower on a CPU)."""

    def __init__(self, c_in: int, c_out: int, norm: str) -> None:
        super().__init__()
        make = (lambda c: nn.BatchNorm2d(c)) if norm == "batch" else (lambda c: nn.Identity())
        self.norm1, self.norm2 = make(c_in), make(c_out)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, 1, 1)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1)
        self.shortcut = nn.Conv2d(c_in, c_out, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        up = lambda t: F.interpolate(t, scale_factor=2, mode="nearest")  # noqa: E731
        h = self.conv1(up(F.relu(self.norm1(x))))
        h = self.conv2(F.relu(self.norm2(h)))
        # a 1×1 conv commutes with nearest upsampling: project first, at a quarter the cost
        return h + up(self.shortcut(x))


class ResGenerator(nn.Module):
    """``g_θ(z)``: linear to a ``bottom×bottom`` map, residual up-blocks, conv, ``tanh``.

    ``norm="batch"`` is the paper's generator; ``"none"`` makes every sample depend on its own
    ``z`` only, in training mode too."""

    def __init__(self, shape: tuple[int, ...], nz: int = 128, channels: int = 256,
                 norm: str = "batch", taper: bool = False) -> None:
        super().__init__()
        bottom, n_up, _, _ = layout(shape)
        self.nz, self.channels, self.bottom = nz, channels, bottom
        # taper halves the width at every up-block: the full-resolution convolutions dominate
        # the cost of the z-chain (K_z generator passes per batch), which matters on a CPU.
        widths = [max(1, channels // 2**i) if taper else channels for i in range(n_up + 1)]
        self.lin = nn.Linear(nz, bottom * bottom * channels)
        self.blocks = nn.Sequential(*[_UpBlock(widths[i], widths[i + 1], norm)
                                      for i in range(n_up)])
        self.out_norm = nn.BatchNorm2d(widths[-1]) if norm == "batch" else nn.Identity()
        self.out = nn.Conv2d(widths[-1], shape[0], 3, 1, 1)
        xavier_init(self)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.lin(z.flatten(1)).view(-1, self.channels, self.bottom, self.bottom)
        h = F.relu(self.out_norm(self.blocks(h)))
        return torch.tanh(self.out(h))


# ----------------------------------------------------------------------------- inference


class GaussianEncoder(nn.Module):
    """``x ↦ (μ, log σ²)`` of ``q_φ(z|x)``: a 3×3 conv, ``n_down`` stride-2 4×4 convs that
    double the width, LeakyReLU(0.2), then two convolutions over the whole remaining map."""

    def __init__(self, shape: tuple[int, ...], nz: int = 128, channels: int = 64) -> None:
        super().__init__()
        _, _, n_down, _ = layout(shape)
        layers: list[nn.Module] = [nn.Conv2d(shape[0], channels, 3, 1, 1, bias=False),
                                   nn.LeakyReLU(0.2)]
        c = channels
        for _ in range(n_down):
            layers += [nn.Conv2d(c, 2 * c, 4, 2, 1, bias=False), nn.LeakyReLU(0.2)]
            c *= 2
        self.body = nn.Sequential(*layers)
        side = shape[1] // 2**n_down
        self.mean = nn.Conv2d(c, nz, side)
        self.logvar = nn.Conv2d(c, nz, side)
        xavier_init(self)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(x)
        return self.mean(h).flatten(1), self.logvar(h).flatten(1)


def gaussian_nll(z: torch.Tensor, mean: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """``−log N(z; μ, diag exp(ℓ))`` per row, the full density (the paper's Eq. 15 term)."""
    sq = (z - mean) ** 2 * torch.exp(-logvar)
    return 0.5 * (sq + logvar + math.log(2 * math.pi)).flatten(1).sum(1)
