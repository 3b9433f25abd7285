import math

import pytest
import torch

from shortrun.samplers.sources import DataSource, NoiseSource, PersistentChains, ReplayBuffer


def test_noise_ranges():
    g = torch.Generator().manual_seed(0)
    u = NoiseSource((3,), "uniform", -2.0, 1.0).start(10_000, generator=g)
    assert u.min() >= -2.0 and u.max() <= 1.0 and u.shape == (10_000, 3)
    z = NoiseSource((3,), "normal", std=2.0).start(20_000, generator=g)
    assert abs(z.std().item() - 2.0) < 4 * 2.0 / math.sqrt(2 * 60_000)
    with pytest.raises(ValueError, match="noise kind must be 'uniform' or 'normal'"):
        NoiseSource((3,), "cauchy")


def test_data_source_copies():
    data = torch.randn(5, 2)
    x = DataSource().start(5, data=data)
    x += 1
    assert not torch.equal(x, data)


def test_replay_buffer_reinit_fraction_and_write_back():
    torch.manual_seed(0)
    buf = ReplayBuffer(1000, NoiseSource((2,), "uniform", 10.0, 11.0), reinit=0.2)
    buf.start(10)
    buf.finish(torch.zeros(10, 2))
    buf.store.zero_()  # every stored state is now 0; fresh ones are in [10, 11]
    n = 20_000
    x = buf.start(n)
    fresh = (x[:, 0] >= 10).float().mean().item()
    assert abs(fresh - 0.2) < 4 * math.sqrt(0.2 * 0.8 / n)
    buf.finish(torch.full((n, 2), 7.0))
    assert (buf.store == 7.0).any(1).float().mean() > 0.99  # 20k draws cover ~all 1000 slots
    with pytest.raises(ValueError, match="reinit fraction must be in"):
        ReplayBuffer(10, NoiseSource((2,)), reinit=1.5)


def test_replay_buffer_state_dict_round_trip():
    a = ReplayBuffer(50, NoiseSource((2,)), 0.1)
    a.start(5)
    b = ReplayBuffer(50, NoiseSource((2,)), 0.1)
    b.load_state_dict(a.state_dict())
    assert torch.equal(a.store, b.store) and bool(b.filled)


def test_persistent_chains_rotate_and_persist():
    pc = PersistentChains(6, torch.arange(6.0)[:, None])
    first = pc.start(4)
    assert first.squeeze(1).tolist() == [0, 1, 2, 3]
    pc.finish(first + 100)
    second = pc.start(4)
    assert second.squeeze(1).tolist() == [4, 5, 100, 101]
    with pytest.raises(ValueError, match="only 6 persist"):
        pc.start(7)


def test_persistent_chains_that_all_advance_every_update():
    """The RBMs' PCD: every chain is handed out each update (no rotation, no cursor)."""
    pc = PersistentChains(3, torch.arange(3.0)[:, None], rotating=False)
    assert set(pc.state_dict()) == {"chains"}
    x = pc.start()
    assert x.squeeze(1).tolist() == [0, 1, 2]
    pc.finish(x + 10)
    assert pc.start(3).squeeze(1).tolist() == [10, 11, 12]
    pc.reset(torch.zeros(3, 1))
    assert pc.chains.abs().sum() == 0
    with pytest.raises(ValueError, match="all 3 persistent chains advance every update"):
        pc.start(2)


def test_data_source_hands_a_kernel_state_through():
    """CD's chains start at the batch; a kernel state already computed there (the RBM's
    positive phase) comes back as it is, cut to ``n`` chains."""
    from shortrun.samplers.gibbs import GibbsState

    state = GibbsState(torch.zeros(4, 3), torch.ones(4, 2), torch.full((4, 2), 0.5))
    same = DataSource().start(4, data=state)
    assert isinstance(same, GibbsState) and all(a is b for a, b in zip(same, state, strict=True))
    cut = DataSource().start(2, data=state)
    assert [tuple(t.shape) for t in cut] == [(2, 3), (2, 2), (2, 2)]
    with pytest.raises(ValueError, match="DataSource.start needs the data batch"):
        DataSource().start(2)
