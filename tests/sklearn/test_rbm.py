"""shortrun.sklearn's RBMs against scikit-learn and closed forms: the pseudo-likelihood and
features equal scikit-learn's for the same weights, the exact log p(v) sums to one over all
binary vectors, AIS agrees with it, probabilities enter the positive phase as they are."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.neural_network import BernoulliRBM as SkRBM
from sklearn.pipeline import Pipeline

from shortrun.data.base import DataInfo
from shortrun.models.base import OptimOptions
from shortrun.models.rbm import BernoulliRBM as Model
from shortrun.sklearn import BernoulliRBM, GaussianBernoulliRBM
from shortrun.speed.rbm_numpy import numpy_step


def _probabilities(n=40, d=6, seed=0):
    return np.random.default_rng(seed).random((n, d))


def _fitted(d=6, n_components=3, **kw):
    return BernoulliRBM(n_components=n_components, n_iter=3, learning_rate=0.1,
                        random_state=0, **kw).fit(_probabilities(d=d))


def test_pseudo_likelihood_and_features_are_scikit_learns_for_the_same_weights():
    ours = _fitted()
    sk = SkRBM(n_components=3, random_state=0)
    sk.components_ = ours.components_.astype(np.float64)
    sk.intercept_hidden_ = ours.intercept_hidden_.astype(np.float64)
    sk.intercept_visible_ = ours.intercept_visible_.astype(np.float64)
    sk.n_features_in_ = 6
    X = _probabilities(n=25, seed=1)
    np.testing.assert_allclose(ours.score_samples(X), sk.score_samples(X), rtol=1e-12)
    np.testing.assert_allclose(ours.transform(X), sk.transform(X), rtol=1e-12)
    assert ours.transform(X).dtype == np.float64
    assert ours.transform(X.astype(np.float32)).dtype == np.float32


def test_features_are_the_fitted_models():
    """transform (NumPy, from components_) is the library model's p(h = 1 | v)."""
    ours = _fitted(centering=True)
    X = _probabilities(n=10, seed=3)
    want = ours.model_.transform(torch.from_numpy(X).float()).numpy()
    np.testing.assert_allclose(ours.transform(X), want, rtol=1e-5, atol=1e-6)


def test_exact_log_likelihood_sums_to_one_over_every_binary_vector():
    ours = _fitted(centering=True)
    every = np.array(list(itertools.product([0.0, 1.0], repeat=6)))
    log_p = ours.score_samples(every, method="exact")
    assert abs(np.logaddexp.reduce(log_p)) < 1e-9


def test_ais_agrees_with_the_exact_log_likelihood():
    """AIS's log Z on a 6 × 3 RBM: its standard error at 200 runs × 2000 β is ~1e-3 nats;
    0.02 is 20 of them."""
    ours = _fitted()
    X = (_probabilities(n=30, seed=2) < 0.5).astype(float)
    exact = ours.score_samples(X, method="exact")
    ais = ours.score_samples(X, method="ais", ais_runs=200, ais_betas=2000)
    np.testing.assert_allclose(ais, exact, atol=0.02)


def test_probabilities_enter_the_positive_phase_as_they_are():
    """energy_pos of an update is the mean free energy of the probabilities themselves (not of
    Bernoulli samples or rounded values), on the torch step and the NumPy step."""
    for route in ("torch", "numpy"):
        torch.manual_seed(0)
        m = Model(4, info=DataInfo((6,), "vector"), learning="cd").double()
        with torch.no_grad():
            m.W.normal_(0, 0.5)
            m.b.normal_(0, 0.5)
        v = torch.from_numpy(_probabilities(n=8))
        want = float(m.free_energy(v).mean())
        opt = m.build_optimizers(OptimOptions(lr=0.1))["main"]
        if route == "torch":
            got = m._torch_step(v, {"main": opt})["energy_pos"]
        else:
            chains = m.source.chains if m.options.learning == "pcd" else None
            tensors = (m.W, m.b, m.c, m.mu, m.lam, chains)
            got = numpy_step(tensors, v, m.fast_step_options(), opt)["energy_pos"]
        assert got == pytest.approx(want, rel=1e-12), route


def test_fit_is_repeatable_and_leaves_torchs_random_stream_alone():
    torch.manual_seed(5)
    before = torch.rand(1)
    torch.manual_seed(5)
    a = _fitted()
    after = torch.rand(1)
    b = _fitted()
    assert torch.equal(before, after)
    np.testing.assert_array_equal(a.components_, b.components_)


def test_partial_fit_updates_once_per_call_and_keeps_the_model():
    est = BernoulliRBM(n_components=3, random_state=0)
    X = _probabilities()
    est.partial_fit(X[:10])
    first = est.components_.copy()
    model = est.model_
    est.partial_fit(X[10:20])
    assert est.model_ is model and est.n_steps_ == 2
    assert not np.array_equal(first, est.components_)


def test_options_beyond_scikit_learn_reach_the_model():
    est = _fitted(learning="pt", k=2, momentum=0.5, weight_decay=1e-3, n_chains=4,
                  dtype="float64")
    m = est.model_.options
    assert (m.learning, m.chain, m.k, m.n_chains, m.momentum) == ("pcd", "tempering", 2, 4, 0.5)
    assert est.components_.dtype == np.float64
    assert est.gibbs(_probabilities(n=3)).shape == (3, 6)


@pytest.mark.parametrize("kwargs, message", [
    ({"dtype": "float16"}, r"dtype must be 'float32' or 'float64'; got 'float16'"),
    ({"device": "nowhere"}, r"device must name a torch device"),
])
def test_bad_options_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BernoulliRBM(n_components=2, n_iter=1, **kwargs).fit(_probabilities())


def test_bad_score_methods_are_named():
    est = _fitted()
    with pytest.raises(ValueError, match=r"method must be one of pseudo, exact, ais; got 'x'"):
        est.score_samples(_probabilities(), method="x")
    big = BernoulliRBM(n_components=30, n_iter=1).fit(_probabilities(d=30))
    with pytest.raises(ValueError, match=r"enumerates 2\^30 states.*use method='ais'"):
        big.score_samples(_probabilities(d=30), method="exact")


def test_pipeline_grid_search_and_clone():
    rng = np.random.default_rng(0)
    X = _probabilities(n=60, d=8)
    y = (X[:, 0] > 0.5).astype(int)
    pipe = Pipeline([("rbm", BernoulliRBM(n_iter=2, random_state=0)),
                     ("clf", LogisticRegression())])
    search = GridSearchCV(pipe, {"rbm__n_components": [2, 4],
                                 "rbm__learning_rate": [0.01, 0.1]}, cv=2)
    search.fit(X, y)
    assert set(search.best_params_) == {"rbm__n_components", "rbm__learning_rate"}
    assert clone(BernoulliRBM(k=3)).get_params()["k"] == 3
    assert rng is not None


def test_gaussian_rbm_log_density_integrates_to_one_in_one_dimension():
    """Exact log p(v) of a 1-D Gaussian-Bernoulli RBM (a mixture of 2^n Gaussians) integrated
    on a fine grid over ±12 standard deviations: 1 to the quadrature's error."""
    X = np.random.default_rng(0).normal(2.0, 3.0, (50, 1))
    est = GaussianBernoulliRBM(n_components=3, n_iter=3, random_state=0).fit(X)
    grid = np.linspace(-40, 44, 20001)[:, None]
    total = np.exp(est.score_samples(grid)).sum() * (grid[1, 0] - grid[0, 0])
    assert total == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(ValueError, match=r"method must be 'exact'"):
        est.score_samples(X, method="ais")
    assert est.sigma_.shape == (1,) and est.gibbs(X[:4]).shape == (4, 1)
