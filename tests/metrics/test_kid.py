"""KID: the unbiased MMD² estimator, its zero mean for one distribution, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from shortrun.errors import ConfigError
from shortrun.metrics.kid import kid, mmd2_unbiased, polynomial_kernel


def test_mmd2_matches_pairwise_definition():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((6, 3)), rng.standard_normal((6, 3)) + 0.5
    k = lambda a, b: (a @ b / 3 + 1) ** 3  # noqa: E731
    m = len(x)
    xx = sum(k(x[i], x[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    yy = sum(k(y[i], y[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    xy = sum(k(x[i], y[j]) for i in range(m) for j in range(m)) / (m * m)
    assert mmd2_unbiased(x, y) == pytest.approx(xx + yy - 2 * xy, rel=1e-12)
    assert polynomial_kernel(x, y)[1, 2] == pytest.approx(k(x[1], y[2]))


def test_unbiased_zero_mean_for_one_distribution():
    # 60 independent pairs of samples from N(0, I): each full-set MMD² estimate is unbiased,
    # so their mean is 0 up to sampling error; tolerance 4 standard errors of that mean.
    rng = np.random.default_rng(1)
    values = np.array([kid(rng.standard_normal((100, 4)), rng.standard_normal((100, 4)),
                           n_subsets=1, subset_size=100)[0] for _ in range(60)])
    se = values.std(ddof=1) / np.sqrt(len(values))
    assert abs(values.mean()) < 4 * se
    # ... while a shifted distribution is far above that noise.
    shifted = kid(rng.standard_normal((100, 4)), rng.standard_normal((100, 4)) + 1.0,
                  n_subsets=1, subset_size=100)[0]
    assert shifted > 20 * se


def test_subsets_report_mean_and_std():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((300, 5)), rng.standard_normal((200, 5)) + 0.3
    mean, std = kid(a, b, n_subsets=20, subset_size=1000, seed=3)  # size capped at 200
    assert mean > 0 and std > 0
    assert kid(a, b, n_subsets=20, subset_size=1000, seed=3) == (mean, std)


def test_bad_input_is_named():
    with pytest.raises(ConfigError, match="feature sizes differ"):
        kid(np.zeros((5, 2)), np.zeros((5, 3)))
    with pytest.raises(ConfigError, match="n_subsets must be"):
        kid(np.zeros((5, 2)), np.zeros((5, 2)), n_subsets=0)
    with pytest.raises(ConfigError, match="second set.*at least 2"):
        kid(np.zeros((5, 2)), np.zeros((1, 2)))
