"""The minibatch order and gather (:mod:`shortrun.train.batcher`)."""

import pytest
import torch

from shortrun.errors import ConfigError
from shortrun.train.batcher import EpochBatcher, gather_rows


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.uint8, torch.int64,
                                   torch.bfloat16])
def test_gather_rows_is_torch_indexing_bit_for_bit(dtype):
    g = torch.Generator().manual_seed(0)
    data = (torch.rand(50, 3, 4, generator=g) * 200).to(dtype)
    idx = torch.randperm(50, generator=g)[:17]
    got = gather_rows(data, idx)
    assert got.dtype == dtype and got.shape == (17, 3, 4)
    assert torch.equal(got, data[idx])
    got[0].zero_()  # a copy: the dataset is untouched
    assert torch.equal(data[idx[0]], data[idx][0]) and data[idx[0]].any()


def test_gather_rows_of_a_strided_view():
    data = torch.arange(60.0).reshape(10, 6)[:, ::2]
    idx = torch.tensor([9, 0, 4])
    assert torch.equal(gather_rows(data, idx), data[idx])


def test_each_epoch_is_a_permutation_and_the_order_depends_on_the_seed_only():
    b = EpochBatcher(n=10, batch_size=3, seed=5)
    assert b.steps_per_epoch == 3
    seen = torch.cat([b.indices(t) for t in range(3)])
    assert len(set(seen.tolist())) == 9
    again = EpochBatcher(n=10, batch_size=3, seed=5)
    assert torch.equal(again.indices(4), b.indices(4))  # step 4 without steps 0-3
    assert not torch.equal(EpochBatcher(n=10, batch_size=3, seed=6).indices(0), b.indices(0))


def test_ranks_take_disjoint_slices_of_one_global_batch():
    r0, r1 = (EpochBatcher(n=12, batch_size=3, seed=1, rank=r, world=2) for r in (0, 1))
    a, b = r0.indices(1), r1.indices(1)
    assert len(a) == len(b) == 3 and not set(a.tolist()) & set(b.tolist())


def test_a_batch_larger_than_the_data_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match="train.batch_size.*lower it"):
        EpochBatcher(n=10, batch_size=6, seed=0, world=2)
