"""The RBM's scikit-learn-shaped methods against closed forms on a tiny RBM."""

import itertools

import numpy as np
import pytest
import torch

from shortrun.data.base import DataInfo
from shortrun.errors import ConfigError, InputError
from shortrun.models.rbm import BernoulliRBM

INFO = DataInfo(shape=(4,), kind="binary", low=0.0, high=1.0)


def tiny_rbm() -> BernoulliRBM:
    torch.manual_seed(0)
    rbm = BernoulliRBM(n_hidden=3, info=INFO, init_std=0.5)
    with torch.no_grad():
        rbm.b.copy_(torch.tensor([0.3, -0.2, 0.1, 0.0]))
        rbm.c.copy_(torch.tensor([-0.1, 0.4, 0.2]))
    return rbm


def test_transform_is_the_hidden_conditional():
    rbm = tiny_rbm()
    v = np.array([[1, 0, 1, 1], [0, 0, 0, 1]], dtype=np.float32)
    want = torch.sigmoid(rbm.c + torch.from_numpy(v) @ rbm.W).detach()
    torch.testing.assert_close(rbm.transform(v), want)


def test_score_samples_is_a_normalised_log_density():
    """exp(log p(v)) over all 2⁴ visible states sums to 1 (exact log Z by enumeration)."""
    rbm = tiny_rbm()
    states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=4)))
    logp = rbm.score_samples(states)
    assert logp.dtype == torch.float64
    assert float(torch.logsumexp(logp, 0)) == pytest.approx(0.0, abs=1e-6)
    assert rbm.log_likelihood(states[:3]) == pytest.approx(float(logp[:3].mean()))


def test_inputs_of_the_wrong_size_are_refused_with_the_expected_shape():
    rbm = tiny_rbm()
    for method in (rbm.transform, rbm.score_samples, rbm.log_likelihood):
        with pytest.raises(InputError, match=rf"{method.__name__}: expected \(B, 4\) float in "
                                             r"\[0, 1\].*got \(B, 5\)"):
            method(torch.zeros(2, 5))


def test_sizes_alone_make_an_rbm_bound_on_first_data():
    rbm = BernoulliRBM(n_hidden=7)
    assert rbm.options.n_hidden == 7 and rbm.info is None
    with pytest.raises(ConfigError, match=r"does not know the data's shape yet"):
        rbm.sample(2)
    rbm.bind(INFO)
    assert rbm.W.shape == (4, 7) and rbm.sample(2, steps=2).shape == (2, 4)
