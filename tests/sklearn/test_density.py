"""EBMDensity: a density in the data's own scale (the standardisation's Jacobian included),
normalised by the 2-D grid, and by AIS in other dimensions."""

from __future__ import annotations

import numpy as np
import pytest

from shortrun.sklearn import EBMDensity


def test_2d_log_density_integrates_to_one_in_the_datas_scale():
    """exp(score_samples) summed over a grid in the data's own coordinates (far from unit
    scale) is 1 up to the mass outside the normaliser's box and the two grids' discretisation
    (the energy is smooth and the grids are fine: a 2% tolerance)."""
    X = np.random.default_rng(0).normal(size=(200, 2)) * [30.0, 0.5] + [100.0, -4.0]
    est = EBMDensity(hidden=16, steps=20, langevin_steps=5, batch_size=50, grid_size=200,
                     random_state=0).fit(X)
    z_half = np.abs((X - est.mean_) / est.scale_).max() * 1.15
    lo, hi = est.mean_ - z_half * est.scale_, est.mean_ + z_half * est.scale_
    n = 300
    xs, ys = (np.linspace(lo[i], hi[i], n + 1) for i in range(2))
    xc, yc = (xs[1:] + xs[:-1]) / 2, (ys[1:] + ys[:-1]) / 2
    grid = np.stack(np.meshgrid(xc, yc, indexing="ij"), -1).reshape(-1, 2)
    cell = (xs[1] - xs[0]) * (ys[1] - ys[0])
    assert np.exp(est.score_samples(grid)).sum() * cell == pytest.approx(1.0, abs=0.02)
    assert est.score(X[:5]) == pytest.approx(est.score_samples(X[:5]).sum())
    assert est.sample(7, random_state=0).shape == (7, 2)


def test_other_dimensions_take_log_z_from_ais_which_matches_a_fine_grid():
    """3-D: AIS's log Z (in the standardised coordinates) against a 100³-point grid over a box
    that holds the trained density's mass (measured: the grid's value does not move when the
    box doubles); within 3 standard errors plus the grid's discretisation (5e-3)."""
    X = np.random.default_rng(0).normal(size=(400, 3)) * [5.0, 0.5, 2.0] + [10.0, -4.0, 0.0]
    est = EBMDensity(hidden=16, steps=200, langevin_steps=10, batch_size=50,
                     random_state=0).fit(X)
    half, n = 8.0, 100
    edges = np.linspace(-half, half, n + 1)
    centres = (edges[1:] + edges[:-1]) / 2
    grid = np.stack(np.meshgrid(centres, centres, centres, indexing="ij"), -1).reshape(-1, 3)
    neg_e = -est._energy(grid)
    top = neg_e.max()
    grid_log_z = top + np.log(np.exp(neg_e - top).sum()) + 3 * np.log(edges[1] - edges[0])
    assert 0 < est.log_z_se_ < 0.05
    assert est.log_z_ == pytest.approx(grid_log_z, abs=3 * est.log_z_se_ + 5e-3)
    z = (X[:5] - est.mean_) / est.scale_
    want = -est._energy(z) - est.log_z_ - np.log(est.scale_).sum()
    np.testing.assert_allclose(est.score_samples(X[:5]), want)
    assert est.sample(3).shape == (3, 3)
    with pytest.raises(ValueError, match=r"n_samples must be a positive integer; got 0"):
        est.sample(0)


def test_dtype_float64_trains_and_samples_in_float64():
    X = np.random.default_rng(0).normal(size=(32, 2))
    est = EBMDensity(hidden=8, steps=2, langevin_steps=2, batch_size=16, grid_size=20,
                     dtype="float64", random_state=0).fit(X)
    assert next(est.model_.parameters()).dtype.is_floating_point
    assert str(next(est.model_.parameters()).dtype) == "torch.float64"
    assert np.isfinite(est.score_samples(X[:3])).all() and est.sample(2).shape == (2, 2)
