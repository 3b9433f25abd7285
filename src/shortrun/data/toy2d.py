"""Synthetic 2-D data sets: the usual toy densities of the EBM / flow literature.

The Gaussian mixtures (8 and 25 Gaussians) carry their closed-form log density, so the grid
estimator can report KL(data‖model); the others (rings, checkerboard, two moons, swiss roll,
pinwheel, spirals) are defined by their sampler only and are judged by sample MMD. Shapes and
scales follow the toy sets of Grathwohl et al. (FFJORD, 2019), which most EBM papers reuse.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from shortrun.data.base import DataInfo, DataOptions, LoadedData
from shortrun.fields import fld

TOY_NAMES = ("8gaussians", "25gaussians", "rings", "checkerboard", "moons", "swissroll",
             "pinwheel", "spirals")


@dataclass
class ToyOptions(DataOptions):
    name: str = fld("8gaussians", choices=TOY_NAMES)
    n_train: int = fld(50_000, gt=0)
    n_test: int = fld(5_000, gt=0)
    seed: int = fld(1234, ge=0, doc="seed of the synthetic draw (fixed, independent of train)")


@dataclass(frozen=True)
class GaussianMixture2D:
    """Equal-weight isotropic Gaussian mixture in 2-D."""

    centers: torch.Tensor
    std: float

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        idx = torch.randint(len(self.centers), (n,), generator=generator)
        return self.centers[idx] + self.std * torch.randn(n, 2, generator=generator)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        d2 = ((x[:, None, :] - self.centers[None].to(x)) ** 2).sum(-1)
        log_comp = -d2 / (2 * self.std**2) - math.log(2 * math.pi * self.std**2)
        return torch.logsumexp(log_comp, dim=1) - math.log(len(self.centers))


def eight_gaussians() -> GaussianMixture2D:
    angles = torch.arange(8, dtype=torch.float64) * (2 * math.pi / 8)
    centers = 2.0 * torch.stack([angles.cos(), angles.sin()], dim=1)
    return GaussianMixture2D(centers.float(), std=0.2)


def twentyfive_gaussians() -> GaussianMixture2D:
    """5×5 grid with spacing √2 and per-mode std 0.2/√2."""
    grid = torch.arange(-2, 3, dtype=torch.float32) * math.sqrt(2)
    centers = torch.cartesian_prod(grid, grid)
    return GaussianMixture2D(centers, std=0.2 / math.sqrt(2))


MIXTURES = {"8gaussians": eight_gaussians, "25gaussians": twentyfive_gaussians}


# ----------------------------------------------------------------------------- sample-only sets


def rings(n: int, g: torch.Generator) -> torch.Tensor:
    """Four concentric circles (radii 0.75 … 3), equal counts, radial noise 0.08."""
    radius = torch.tensor([0.75, 1.65, 2.4, 3.0])[torch.randint(4, (n,), generator=g)]
    theta = 2 * math.pi * torch.rand(n, generator=g)
    r = radius + 0.08 * torch.randn(n, generator=g)
    return torch.stack([r * theta.cos(), r * theta.sin()], 1)


def checkerboard(n: int, g: torch.Generator) -> torch.Tensor:
    """Uniform on the 8 dark squares of a 4×4 board of side 8."""
    x1 = 4 * torch.rand(n, generator=g) - 2
    x2 = torch.rand(n, generator=g) - 2 * torch.randint(2, (n,), generator=g).float()
    x2 = x2 + torch.floor(x1) % 2
    return 2 * torch.stack([x1, x2], 1)


def moons(n: int, g: torch.Generator) -> torch.Tensor:
    """Two interleaved half circles (scikit-learn's make_moons, noise 0.1), centred, ×2."""
    upper = torch.rand(n, generator=g) < 0.5
    t = math.pi * torch.rand(n, generator=g)
    x = torch.where(upper, t.cos(), 1 - t.cos())
    y = torch.where(upper, t.sin(), 0.5 - t.sin())
    pts = torch.stack([x, y], 1) + 0.1 * torch.randn(n, 2, generator=g)
    return 2 * (pts - torch.tensor([0.5, 0.25]))


def swissroll(n: int, g: torch.Generator) -> torch.Tensor:
    """scikit-learn's 2-D swiss roll (noise 1.0) divided by 5."""
    t = 1.5 * math.pi * (1 + 2 * torch.rand(n, generator=g))
    pts = torch.stack([t * t.cos(), t * t.sin()], 1) + torch.randn(n, 2, generator=g)
    return pts / 5


def pinwheel(n: int, g: torch.Generator) -> torch.Tensor:
    """Five curved arms (radial std 0.3, tangential std 0.1, rate 0.25), scaled ×2."""
    arms, rate = 5, 0.25
    feats = torch.randn(n, 2, generator=g) * torch.tensor([0.3, 0.1])
    feats[:, 0] += 1.0
    label = torch.randint(arms, (n,), generator=g).float()
    angle = label * (2 * math.pi / arms) + rate * feats[:, 0].exp()
    c, s = angle.cos(), angle.sin()
    rot_x = feats[:, 0] * c - feats[:, 1] * s
    rot_y = feats[:, 0] * s + feats[:, 1] * c
    return 2 * torch.stack([rot_x, rot_y], 1)


def spirals(n: int, g: torch.Generator) -> torch.Tensor:
    """Two interleaved spirals (FFJORD's '2spirals')."""
    half = n // 2
    t = torch.sqrt(torch.rand(n - half, generator=g)) * (540 * 2 * math.pi / 360)
    dx = -t.cos() * t + 0.5 * torch.rand(n - half, generator=g)
    dy = t.sin() * t + 0.5 * torch.rand(n - half, generator=g)
    arm = torch.stack([dx, dy], 1)
    pts = torch.cat([arm, -arm[:half]]) / 3
    pts = pts + 0.1 * torch.randn(n, 2, generator=g)
    return pts[torch.randperm(n, generator=g)]


SAMPLERS: dict[str, Callable[[int, torch.Generator], torch.Tensor]] = {
    "rings": rings, "checkerboard": checkerboard, "moons": moons, "swissroll": swissroll,
    "pinwheel": pinwheel, "spirals": spirals,
}


def toy_density(name: str) -> GaussianMixture2D | None:
    """The closed-form density of a toy set, or None where it has none."""
    factory = MIXTURES.get(name)
    return factory() if factory else None


def toy_sample(name: str, n: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` points of toy set ``name`` drawn with ``generator``."""
    density = toy_density(name)
    if density is not None:
        return density.sample(n, generator)
    if name not in SAMPLERS:
        raise ValueError(f"unknown toy data set {name!r}; known: {', '.join(TOY_NAMES)}")
    return SAMPLERS[name](n, generator)


def load_toy(options: ToyOptions) -> LoadedData:
    g = torch.Generator().manual_seed(options.seed)
    train = toy_sample(options.name, options.n_train, g).float()
    test = toy_sample(options.name, options.n_test, g).float()
    half_width = float(train.abs().max()) * 1.15
    extras: dict = {"plot_range": half_width}
    density = toy_density(options.name)
    if density is not None:
        extras["density"] = density
    return LoadedData(train=train, test=test, info=DataInfo(shape=(2,), kind="vector"),
                      extras=extras)
