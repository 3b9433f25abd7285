"""``shortrun.routes``: the fastest candidate wins, the choice survives a new process through
the cache file, a corrupt file costs one warning, and a pin skips the timing."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from shortrun import products, routes
from shortrun.errors import ConfigError


@pytest.fixture
def fake_timer(monkeypatch):
    """Replace the timing: ``times[name]`` seconds per candidate; ``calls`` records them."""
    monkeypatch.delenv("SHORTRUN_ROUTE")
    calls: list[str] = []
    times = {"torch": 3.0, "onednn": 2.0, "numpy": 1.0}

    def fake(name, fn):
        calls.append(name)
        fn()  # the candidate still runs: a broken one would show here
        return times[name]

    monkeypatch.setattr(routes, "measure", fake)
    return times, calls


def _run_product():
    a, b, c = torch.rand(100, 64), torch.rand(64, 20), torch.rand(20)
    return products.route_for(a, b, c)


def test_the_fastest_candidate_wins_and_is_timed_once(fake_timer):
    times, calls = fake_timer
    assert _run_product() == "numpy"
    assert sorted(calls) == ["numpy", "onednn", "torch"]
    assert _run_product() == "numpy" and len(calls) == 3  # remembered, not re-timed
    times.update(torch=0.5)
    routes.forget()  # a new process: the cache file answers, the timer is not called
    assert _run_product() == "numpy" and len(calls) == 3


def test_cache_round_trip(fake_timer):
    _run_product()
    data = json.loads(routes.cache_path().read_text())
    [(key, entry)] = data[routes.machine_key()].items()
    assert key == "rbm|float32|threads=1|128x64x32|NN|bias"
    assert entry == {"name": "numpy", "us": {"numpy": 1e6, "onednn": 2e6, "torch": 3e6}}
    assert routes.remembered()[key] == entry


def test_keys_separate_thread_counts_and_buckets():
    a = torch.rand(100, 64)
    keys = {products.route_key("rbm", a, torch.rand(64, 20), None),
            products.route_key("rbm", a, torch.rand(64, 500), None),
            products.route_key("rbm", a, torch.rand(20, 64).t(), None)}
    torch.set_num_threads(2)
    keys.add(products.route_key("rbm", a, torch.rand(64, 20), None))
    assert len(keys) == 4
    assert routes.bucket(100) == 128 and routes.bucket(64) == 64 and routes.bucket(1) == 1


def test_a_corrupt_cache_is_ignored_with_one_warning(fake_timer):
    _, calls = fake_timer
    path = routes.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    with pytest.warns(UserWarning, match=r"ignoring the route cache .*routes\.json") as got:
        assert _run_product() == "numpy"
        a, b = torch.rand(100, 784), torch.rand(784, 500)
        products.route_for(a, b)  # a second shape: no second warning
    assert len(got) == 1 and len(calls) == 6
    assert "it is safe to delete" in str(got[0].message)
    routes.forget()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file was rewritten whole
        assert _run_product() == "numpy"


@pytest.mark.parametrize("var", ["SHORTRUN_ROUTE", "SHORTRUN_ROUTE_RBM"])
def test_a_pin_skips_the_timing(fake_timer, monkeypatch, var):
    _, calls = fake_timer
    monkeypatch.setenv(var, "torch")
    assert _run_product() == "torch" and calls == []
    assert not routes.cache_path().exists()


def test_the_family_pin_beats_the_global_one(monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE_RBM", "numpy")
    assert routes.pinned_route("rbm", products.ROUTES) == "numpy"


def test_an_unknown_pin_names_the_routes(monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE", "mkl")
    with pytest.raises(ConfigError) as err:
        _run_product()
    assert str(err.value) == ("SHORTRUN_ROUTE=mkl is not a route; use one of torch, onednn, "
                              "numpy, or unset it to choose by measurement")


def test_the_real_timer_runs_the_call_and_returns_seconds():
    calls = []
    seconds = routes.measure("torch", lambda: calls.append(1))
    assert 2 <= len(calls) <= routes.REPEATS + 1  # a warm-up, then best of at most REPEATS
    assert seconds >= 0.0 and seconds != float("inf")
