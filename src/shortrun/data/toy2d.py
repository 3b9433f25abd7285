"""Synthetic 2-D densities with closed-form log densities (for grid KL and pictures)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from shortrun.data.base import DataInfo, DataOptions, LoadedData
from shortrun.train.fields import fld


@dataclass
class ToyOptions(DataOptions):
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


def toy_density(name: str) -> GaussianMixture2D | None:
    """The closed-form density of a toy set, or None where it has none."""
    factory = MIXTURES.get(name)
    return factory() if factory else None


def load_toy(options: ToyOptions) -> LoadedData:
    density = toy_density(options.name)
    assert density is not None, options.name
    g = torch.Generator().manual_seed(options.seed)
    train = density.sample(options.n_train, g)
    test = density.sample(options.n_test, g)
    half_width = float(train.abs().max()) * 1.15
    return LoadedData(
        train=train,
        test=test,
        info=DataInfo(shape=(2,), kind="vector"),
        extras={"density": density, "plot_range": half_width},
    )
