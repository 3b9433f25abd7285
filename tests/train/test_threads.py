"""``ThreadsForTheWork``: one thread for a run whose first step used only measured routes that
chose one thread; never over the user's ``train.threads`` or a pinned route."""

from __future__ import annotations

import pytest
import torch

from shortrun.speed import engine as routes
from shortrun.train.threads import ThreadsForTheWork


def _route(name: str, key: str | None = "k") -> routes.Chosen:
    chosen = routes.Chosen(name, {name: lambda: None})
    chosen.key = key  # as if measured (key) or pinned (None)
    routes.MEMO[(name, key)] = chosen
    return chosen


@pytest.mark.parametrize(("names", "key", "user", "expect"), [
    (["torch@1", "onednn@1"], "k", None, 1),  # every route used chose one thread
    (["torch@1", "onednn"], "k", None, 2),  # one wants the threads
    (["torch@1"], None, None, 2),  # pinned: nothing was measured
    (["torch@1"], "k", 2, 2),  # the user's train.threads
    ([], "k", None, 2),  # no routed product in the step
])
def test_the_first_step_decides(names, key, user, expect):
    torch.set_num_threads(2)
    chosen = [_route(n, key) for n in names]
    _route("torch", "k")  # memoised earlier but not called in this step: does not count
    threads = ThreadsForTheWork(user)
    for c in chosen:
        c()
    threads.after_first_step()
    assert torch.get_num_threads() == expect
    for c in chosen:
        c()
    threads.after_first_step()  # only the first step decides
    threads.restore()
    assert torch.get_num_threads() == 2
