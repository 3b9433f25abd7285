"""``shortrun.models.base.Model``: a deep copy of a model (the RBM's route twins, a user's EMA
copy) copies its parameters, buffers and options but shares the run's read-only reference data
instead of duplicating the dataset."""

from __future__ import annotations

import copy

import torch

from shortrun.data.array import array_data
from shortrun.models.rbm import BernoulliRBM


def test_deepcopy_shares_the_reference_data_and_copies_everything_else():
    data = array_data((torch.rand(40, 6) < 0.5).float())
    model = BernoulliRBM(n_hidden=3, info=data.info)
    model.reference_data = data
    twin = copy.deepcopy(model)
    assert twin.reference_data is data
    assert type(twin) is BernoulliRBM and twin.options == model.options
    assert twin.options is not model.options
    for (name, p), (_, q) in zip(model.named_parameters(), twin.named_parameters(), strict=True):
        assert torch.equal(p, q) and p.data_ptr() != q.data_ptr(), name
    with torch.no_grad():
        twin.W.add_(1.0)
    assert not torch.equal(twin.W, model.W)
    x = data.train[:5].reshape(5, -1)
    assert torch.allclose(copy.deepcopy(model).free_energy(x), model.free_energy(x))


def test_deepcopy_without_reference_data():
    model = BernoulliRBM(n_hidden=2, info=array_data(torch.zeros(4, 3)).info)
    twin = copy.deepcopy(model)
    assert twin.reference_data is None and torch.equal(twin.W, model.W)
