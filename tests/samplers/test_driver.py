"""The one driver loop (``samplers/driver.py``): exact bookkeeping on a kernel whose moves and
accepts are known in advance."""

from __future__ import annotations

from typing import NamedTuple

import torch

from shortrun.samplers.driver import iterate, iterate_mh


class State(NamedTuple):
    x: torch.Tensor
    energy: torch.Tensor


class Info(NamedTuple):
    is_accepted: torch.Tensor


# chain 0 accepts every move, chain 1 every other, chain 2 never
PATTERN = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 0], [1, 0, 0]], dtype=torch.bool)


def step(state: State) -> tuple[State, Info]:
    k = int(state.energy[0])
    accept = PATTERN[k]
    x = torch.where(accept, state.x + 1, state.x)
    return State(x, state.energy + 1), Info(accept)


def test_iterate_runs_n_steps_in_order_and_returns_the_last_info():
    seen = []
    state, info = iterate(step, State(torch.zeros(3), torch.zeros(3)), 3,
                          lambda k, s, i: seen.append((k, s.x.tolist())))
    assert [k for k, _ in seen] == [0, 1, 2]
    assert state.x.tolist() == [3.0, 2.0, 0.0] and torch.equal(info.is_accepted, PATTERN[2])
    assert iterate(step, state, 0) == (state, None)


def test_iterate_mh_reports_each_chains_acceptance_rate_and_final_energy():
    x, info = iterate_mh(step, State(torch.zeros(3), torch.zeros(3)), 4)
    assert x.tolist() == [4.0, 2.0, 0.0]
    assert info.acceptance_rate.tolist() == [1.0, 0.5, 0.0]
    assert info.energy.tolist() == [4.0, 4.0, 4.0]
