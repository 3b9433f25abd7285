"""Toy 2-D data sets: shapes, determinism, geometry, and the closed-form mixture densities."""

from __future__ import annotations

import math

import pytest
import torch

from shortrun.data.registry import load_data
from shortrun.data.toy2d import TOY_NAMES, ToyOptions, toy_density, toy_sample
from shortrun.errors import ConfigError
from shortrun.estimators.grid import make_grid
from shortrun.train.config import build_section


@pytest.mark.parametrize("name", TOY_NAMES)
def test_every_toy_set_loads_deterministically(name):
    a = load_data(ToyOptions(name=name, n_train=500, n_test=100))
    b = load_data(ToyOptions(name=name, n_train=500, n_test=100))
    assert a.train.shape == (500, 2) and a.test.shape == (100, 2)
    assert a.info.shape == (2,) and a.info.kind == "vector"
    assert torch.isfinite(a.train).all() and torch.equal(a.train, b.train)
    assert not torch.equal(a.train[:100], a.test)
    assert float(a.train.abs().max()) < 5.0 < a.extras["plot_range"] * 2
    assert ("density" in a.extras) == (name in ("8gaussians", "25gaussians"))


@pytest.mark.parametrize("name", ["8gaussians", "25gaussians"])
def test_mixture_density_integrates_to_one_and_matches_samples(name):
    density = toy_density(name)
    xy, area = make_grid(5.0, 500)
    total = float(density.log_prob(xy.double()).exp().sum() * area)
    assert total == pytest.approx(1.0, abs=1e-4)
    x = toy_sample(name, 20000, torch.Generator().manual_seed(0))
    # Var of the whole mixture: std² + mean squared centre distance; SE from the 4th moment.
    expected = density.std**2 + float((density.centers**2).sum(1).mean()) / 2
    se = float(x[:, 0].pow(2).std()) / math.sqrt(len(x))
    assert abs(float(x[:, 0].pow(2).mean()) - expected) < 4.5 * se


def test_25_gaussians_geometry():
    d = toy_density("25gaussians")
    assert d.centers.shape == (25, 2)
    gaps = torch.unique(d.centers[:, 0]).diff()
    assert torch.allclose(gaps, torch.full((4,), math.sqrt(2)))
    assert d.std == pytest.approx(0.2 / math.sqrt(2))


def test_checkerboard_only_fills_dark_squares():
    x = toy_sample("checkerboard", 5000, torch.Generator().manual_seed(1)) / 2
    parity = (torch.floor(x[:, 0]) + torch.floor(x[:, 1])) % 2
    assert bool((parity == 0).all())


def test_moons_and_spirals_are_centred():
    for name in ("moons", "spirals", "pinwheel", "rings"):
        x = toy_sample(name, 20000, torch.Generator().manual_seed(2))
        se = x.std(0) / math.sqrt(len(x))
        assert (x.mean(0).abs() < 0.1 + 4.5 * se).all(), (name, x.mean(0))


def test_unknown_toy_name_names_the_key():
    with pytest.raises(ConfigError, match="data.name: must be one of"):
        build_section("data", ToyOptions, {"name": "9gaussians"})
    with pytest.raises(ValueError, match="unknown toy data set 'nope'"):
        toy_sample("nope", 3, torch.Generator())
