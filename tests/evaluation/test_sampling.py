"""The one chunked sampler: chunk sizes, order, detaching, tuples, and a clear refusal."""

from __future__ import annotations

import pytest
import torch

from shortrun.errors import ConfigError
from shortrun.evaluation.sampling import sample_in_chunks


def counting_draw(calls: list[int]):
    def draw(k: int) -> torch.Tensor:
        start = sum(calls)
        calls.append(k)
        w = torch.ones(1, requires_grad=True)
        return (torch.arange(start, start + k, dtype=torch.float32) * w).reshape(k, 1)

    return draw


def test_chunks_sum_to_n_in_order_detached_on_cpu():
    calls: list[int] = []
    ticks: list[int] = []
    x = sample_in_chunks(counting_draw(calls), 250, 100, ticks.append)
    assert calls == [100, 100, 50] and ticks == calls
    torch.testing.assert_close(x, torch.arange(250.0).reshape(250, 1))
    assert not x.requires_grad and x.device.type == "cpu"


def test_tuples_are_concatenated_element_wise():
    def draw(k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(k, 2), torch.ones(k, 3)

    a, b = sample_in_chunks(draw, 7, 3)
    assert a.shape == (7, 2) and b.shape == (7, 3) and bool((b == 1).all())


@pytest.mark.parametrize("n, bs", [(0, 10), (5, 0)])
def test_nothing_to_draw_is_refused(n, bs):
    with pytest.raises(ConfigError, match=f"n > 0 and batch_size > 0; got n={n}, batch_size={bs}"):
        sample_in_chunks(counting_draw([]), n, bs)
