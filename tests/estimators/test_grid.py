"""Grid KL against closed forms, sample MMD against its closed form, and their errors."""

from __future__ import annotations

import math

import pytest
import torch

from shortrun.data.toy2d import GaussianMixture2D, ToyOptions, load_toy
from shortrun.errors import ConfigError
from shortrun.estimators.grid import grid_metrics, kl_data_model, save_density_and_samples
from shortrun.metrics.mmd import mmd2

ONE = GaussianMixture2D(torch.zeros(1, 2), std=0.5)


def test_grid_kl_is_zero_for_the_true_density():
    assert abs(kl_data_model(ONE, lambda x: -ONE.log_prob(x), 4.0, 300)) < 1e-9


@pytest.mark.parametrize("ratio", [0.7, 1.5])
def test_grid_kl_of_a_wider_gaussian_matches_the_closed_form(ratio):
    """KL(N(0, σ²I) ‖ N(0, r²σ²I)) = 2 (log r + 1/(2r²) − ½) in 2-D."""
    s2 = (0.5 * ratio) ** 2

    def energy(x):
        return (x.double() ** 2).sum(1) / (2 * s2)

    closed = 2 * (math.log(ratio) + 1 / (2 * ratio**2) - 0.5)
    assert kl_data_model(ONE, energy, 4.0, 400) == pytest.approx(closed, abs=1e-3)


def test_kl_grid_needs_a_closed_form_density_and_2d_data():
    rings = load_toy(ToyOptions(name="rings", n_train=200, n_test=50))
    with pytest.raises(ConfigError, match="kl_grid needs a closed-form data density"):
        grid_metrics(lambda x: x.sum(1), rings, ["kl_grid"])
    rings.info.shape = (1, 2)
    with pytest.raises(ConfigError, match="need 2-D data"):
        grid_metrics(lambda x: x.sum(1), rings, ["loglik_grid"])


def test_loglik_grid_of_the_true_density_matches_its_mean_log_prob():
    data = load_toy(ToyOptions(name="8gaussians", n_train=2000, n_test=2000))
    density = data.extras["density"]
    out = grid_metrics(lambda x: -density.log_prob(x.double()), data, ["loglik_grid"], n=600)
    exact = float(density.log_prob(data.test.double()).mean())
    assert out["loglik_grid"] == pytest.approx(exact, abs=0.02)  # cell-centre discretisation


def test_mmd_matches_its_closed_form_for_shifted_1d_gaussians():
    """P = N(0, 1), Q = N(Δ, 1), one Gaussian kernel of width h:
    MMD² = 2h/√(h² + 2)·(1 − exp(−Δ²/(2(h² + 2)))). 20 replicates give the SE."""
    h, delta, n = 1.0, 0.5, 400
    closed = 2 * h / math.sqrt(h * h + 2) * (1 - math.exp(-delta**2 / (2 * (h * h + 2))))
    g = torch.Generator().manual_seed(0)
    vals = torch.tensor([mmd2(torch.randn(n, 1, generator=g),
                              delta + torch.randn(n, 1, generator=g), (h,)) for _ in range(20)])
    se = float(vals.std()) / math.sqrt(len(vals))
    assert abs(float(vals.mean()) - closed) < 4.5 * se
    same = torch.tensor([mmd2(torch.randn(n, 1, generator=g), torch.randn(n, 1, generator=g),
                              (h,)) for _ in range(20)])
    assert abs(float(same.mean())) < 4.5 * float(same.std()) / math.sqrt(20)  # unbiased at P = Q


def test_mmd_refuses_bad_inputs_with_a_message():
    with pytest.raises(ValueError, match="at least 2 points"):
        mmd2(torch.zeros(1, 2), torch.zeros(5, 2))
    with pytest.raises(ValueError, match="differ in dimension: 2 vs 3"):
        mmd2(torch.zeros(4, 2), torch.zeros(4, 3))
    with pytest.raises(ValueError, match="bandwidths must be positive"):
        mmd2(torch.zeros(4, 2), torch.zeros(4, 2), (0.0,))


def test_density_picture_is_written(tmp_path):
    path = tmp_path / "d.png"
    save_density_and_samples(lambda x: -ONE.log_prob(x), torch.randn(50, 2), torch.randn(80, 2),
                             3.0, path, title="t", n=40)
    assert path.stat().st_size > 1000
