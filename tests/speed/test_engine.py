"""``shortrun.speed.engine``: the fastest candidate wins, the choice survives a new process
through the cache file, a corrupt file costs one warning, a pin skips the timing, and a settled
route is never timed again; a toy family shows the engine's decisions (cross-check, fixed
fallback, pins, rule, replay, the provenance record) without any real product."""

from __future__ import annotations

import json
import types
import warnings

import pytest
import torch

from shortrun.energies.rbm import BernoulliRBMParams
from shortrun.errors import ConfigError
from shortrun.speed import cache
from shortrun.speed import engine as routes


def test_the_fastest_candidate_wins_and_is_timed_once(toy, toy_times):
    times, calls = toy_times
    assert routes.settle(toy, torch.ones(3)).name == "slow"  # "wrong" fails its check
    assert sorted(calls) == sorted(["good", "slow"] * routes.ROUNDS)
    timed = len(calls)
    assert routes.settle(toy, torch.ones(4)).name == "slow" and len(calls) == timed  # remembered
    times.update(good=0.1)
    routes.forget()  # a new process: the cache file answers, the timer is not called
    assert routes.settle(toy, torch.ones(3)).name == "slow" and len(calls) == timed


def test_cache_round_trip(toy, toy_times):
    routes.settle(toy, torch.ones(3))
    data = json.loads(cache.cache_path().read_text())
    [(key, entry)] = data[cache.machine_key()].items()
    assert key == "toy|rows=4"
    assert entry == {"name": "slow", "us": {"good": 2e6, "slow": 1e6}}
    assert routes.remembered()[key] == entry


def test_forgetting_this_machine_drops_its_choices_and_keeps_other_machines(toy, toy_times):
    times, calls = toy_times
    assert routes.settle(toy, torch.ones(3)).name == "slow"
    path = cache.cache_path()
    data = json.loads(path.read_text())
    data["another CPU | torch 0"] = {"k": {"name": "torch", "us": {"torch": 1.0}}}
    path.write_text(json.dumps(data))
    routes.forget()
    timed = len(calls)
    times.update(good=0.5)  # the machine changed since the choice was cached
    assert routes.settle(toy, torch.ones(3)).name == "slow" and len(calls) == timed  # cached
    assert routes.forget_machine() == 1
    left = json.loads(path.read_text())
    assert cache.machine_key() not in left and "another CPU | torch 0" in left
    assert routes.settle(toy, torch.ones(3)).name == "good"  # ... timed again
    assert len(calls) == timed + 2 * routes.ROUNDS
    assert routes.forget_machine() == 1 and routes.forget_machine() == 0


def test_forgetting_without_a_cache_file_writes_none():
    assert routes.forget_machine() == 0 and not cache.cache_path().exists()


def test_buckets_are_powers_of_two():
    assert routes.bucket(100) == 128 and routes.bucket(64) == 64 and routes.bucket(1) == 1


def test_a_corrupt_cache_is_ignored_with_one_warning(toy, toy_times):
    _, calls = toy_times
    path = cache.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    with pytest.warns(UserWarning, match=r"ignoring the route cache .*routes\.json") as got:
        assert routes.settle(toy, torch.ones(3)).name == "slow"
        routes.settle(toy, torch.ones(30))  # a second shape: no second warning
    assert len(got) == 1 and len(calls) == 4 * routes.ROUNDS
    assert "it is safe to delete" in str(got[0].message)
    routes.forget()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file was rewritten whole
        assert routes.settle(toy, torch.ones(3)).name == "slow"


def test_a_settled_route_is_never_timed_again(toy, toy_times, monkeypatch):
    """However slow its calls turn out, a route keeps its choice for the process: a switch
    mid-run would make the run's arithmetic depend on its neighbours' load."""
    _, calls = toy_times
    chosen = routes.route(toy, ("toy", 3), torch.ones(3))
    timed = len(calls)
    monkeypatch.setattr(routes, "time", None)  # any reading of the clock fails
    for _ in range(1000):
        torch.testing.assert_close(chosen(torch.ones(3)), 2 * torch.ones(3))
    assert chosen.name == "slow" and chosen.calls == 1000 and len(calls) == timed
    assert routes.route(toy, ("toy", 3), torch.ones(3)) is chosen


def test_the_family_pin_beats_the_global_one(monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE_RBM_STEP", "numpy")
    monkeypatch.setenv("SHORTRUN_ROUTE", "torch")
    assert routes.pinned_route("rbm_step") == "numpy"


def test_an_unknown_pin_names_the_routes(monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE", "mkl")
    with pytest.raises(ConfigError) as err:
        routes.pinned_route("rbm_step")
    assert str(err.value) == ("SHORTRUN_ROUTE=mkl is not a route; use one of torch, numpy, "
                              "nchw, nhwc, conv, fold, gemm, or unset it to choose by "
                              "measurement")


def test_an_unknown_family_pin_names_that_familys_routes(monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE_CONV", "numpy")
    with pytest.raises(ConfigError) as err:
        routes.pinned_route("conv")
    assert str(err.value) == ("SHORTRUN_ROUTE_CONV=numpy is not a conv route; use one of "
                              "nchw, nhwc, or unset it to choose by measurement")


@pytest.mark.parametrize("value", ["onednn", "torch", "fixed", "mkl"])
def test_a_pin_of_the_removed_mlp_family_is_ignored(monkeypatch, value):
    """``SHORTRUN_ROUTE_MLP`` pinned the MLP pass's products, a family removed in issue 42 with
    the private oneDNN op it raced: the pass is plain ``F.linear`` whatever it says, and no
    family reads it, so old scripts keep running."""
    monkeypatch.setenv("SHORTRUN_ROUTE_MLP", value)
    monkeypatch.delenv("SHORTRUN_ROUTE")
    assert "mlp" not in routes.FAMILIES
    assert all(routes.pinned_route(f) in (None, "nhwc") for f in routes.FAMILIES)


def test_the_global_pin_of_the_removed_onednn_route_fixes_every_family(monkeypatch):
    """``SHORTRUN_ROUTE=onednn`` named a route of the deleted ``mlp`` (and ``rbm``) family and
    put every other family on its fixed route; it still does, for every family, and is not
    offered as a route."""
    monkeypatch.delenv("SHORTRUN_ROUTE_CONV")
    monkeypatch.setenv("SHORTRUN_ROUTE", "onednn")
    assert all(routes.pinned_route(f) == routes.FIXED for f in routes.FAMILIES)
    assert "onednn" not in {r for rs in routes.FAMILIES.values() for r in rs}


@pytest.mark.parametrize("value", ["onednn", "numpy", "torch", "mkl"])
def test_a_pin_of_the_removed_rbm_products_family_is_ignored(monkeypatch, value):
    """``SHORTRUN_ROUTE_RBM`` pinned the products family, removed in issue 42: the products are
    ``torch.addmm`` whatever it says, and no family reads it, so old scripts keep running."""
    monkeypatch.setenv("SHORTRUN_ROUTE_RBM", value)
    monkeypatch.delenv("SHORTRUN_ROUTE")
    assert "rbm" not in routes.FAMILIES
    assert all(routes.pinned_route(f) in (None, "nhwc") for f in routes.FAMILIES)
    g = torch.Generator().manual_seed(0)
    W, b, c = (torch.randn(*s, generator=g) for s in ((6, 4), (6,), (4,)))
    v = (torch.rand(5, 6, generator=g) < 0.5).float()
    assert torch.equal(BernoulliRBMParams(W, b, c).hidden_input(v), torch.addmm(c, v, W))


@pytest.mark.parametrize(("pin", "family", "expect"), [
    ("onednn", "rbm_step", routes.FIXED), ("onednn", "conv", routes.FIXED),
    ("numpy", "deconv", routes.FIXED), ("numpy", "rbm_step", "numpy"),
    ("nchw", "conv", "nchw"), ("nchw", "rbm_step", routes.FIXED)])
def test_the_global_pin_fixes_the_families_it_names_no_route_of(monkeypatch, pin, family,
                                                                expect):
    monkeypatch.delenv("SHORTRUN_ROUTE_CONV", raising=False)
    monkeypatch.setenv("SHORTRUN_ROUTE", pin)
    assert routes.pinned_route(family) == expect


def _clock(monkeypatch, ticks):
    """routes' ``time.perf_counter`` reads ``ticks`` (the real clock stays untouched)."""
    ticks = iter(ticks)
    monkeypatch.setattr(routes, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))


def test_the_timer_takes_the_median(monkeypatch):
    _clock(monkeypatch, [0, 5, 0, 1, 0, 3, 0, 2, 0, 4])  # calls of 5, 1, 3, 2 and 4 s
    monkeypatch.setattr(routes, "BUDGET_S", 100.0)
    assert routes.measure("x", lambda: None) == 3


def test_the_real_timer_runs_the_call_and_returns_seconds():
    calls = []
    seconds = routes.measure("torch", lambda: calls.append(1))
    assert 2 <= len(calls) <= routes.REPEATS + 1  # a warm-up, then best of at most REPEATS
    assert seconds >= 0.0 and seconds != float("inf")


def test_a_burst_of_load_in_one_round_does_not_decide(monkeypatch):
    """torch's first block ran during a neighbour's burst (10 s); its other rounds are the
    fastest, so it wins on its median round (one block per candidate would pick numpy)."""
    rounds = {"torch": iter([10.0, 1.0, 1.0]), "numpy": iter([2.0, 2.0, 2.0])}
    monkeypatch.setattr(routes, "ROUNDS", 3)
    monkeypatch.setattr(routes, "measure", lambda name, fn: next(rounds[name]))
    assert routes.race("k", {"torch": lambda: None, "numpy": lambda: None}) == "torch"
    assert routes.remembered()["k"]["us"] == {"torch": 1e6, "numpy": 2e6}
    routes.forget()


# --- the engine's decisions, on a toy family -------------------------------------------------

class Toy(routes.Family):
    """``x -> 2x`` by ``good`` (right), ``wrong`` (a candidate whose arithmetic is wrong: the
    cross-check must reject it) or ``slow`` (right), fixed route ``good``; ``rule`` is the
    size rule's answer (None: race)."""

    name, routes = "toy", ("good", "wrong", "slow")
    impls = {"good": lambda x: 2 * x, "wrong": lambda x: 2 * x + 1e-3,
             "slow": lambda x: x + x}

    def __init__(self, rule=None):
        self.size_rule, self.checked = rule, []

    def candidates(self, x):
        return list(self.routes)

    def fixed(self, x):
        return "good"

    def key(self, x):
        return None if x.dtype == torch.int64 else f"toy|rows={routes.bucket(len(x))}"

    def check_key(self, route, x):
        return x.dtype

    def cross_check(self, route, x):
        self.checked.append(route)
        x64 = torch.arange(5, dtype=torch.float64)
        return torch.allclose(self.impls[route](x64.to(x.dtype)).double(), 2 * x64)

    def rule(self, x):
        return self.size_rule


@pytest.fixture
def toy_times(monkeypatch):
    """The timer replaced: ``times[name]`` seconds per candidate; ``calls`` records them."""
    times = {"good": 2.0, "wrong": 0.5, "slow": 1.0}
    calls: list[str] = []

    def fake(name, fn):
        calls.append(name)
        fn()  # the candidate still runs: a broken one would show here
        return times[name]

    monkeypatch.setattr(routes, "measure", fake)
    return times, calls


@pytest.fixture
def toy(monkeypatch, toy_times):
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.setitem(routes.FAMILIES, "toy", Toy.routes)
    monkeypatch.setattr(routes, "_checked", {})
    return Toy()


def test_the_cross_check_rejects_a_wrong_candidate_however_fast(toy):
    chosen = routes.settle(toy, torch.ones(3))
    assert chosen.name == "slow"  # "wrong" would have won the race
    assert set(routes.remembered()["toy|rows=4"]["us"]) == {"good", "slow"}
    assert sorted(toy.checked) == ["good", "slow", "wrong"]
    routes.settle(toy, torch.ones(4))
    assert len(toy.checked) == 3  # once per check key


def test_a_cross_check_that_raises_rejects_the_route(toy, monkeypatch):
    monkeypatch.setattr(Toy, "cross_check", lambda self, route, x: 1 / 0)
    assert routes.settle(toy, torch.ones(3)).name == "good"  # nothing passed: the fixed route
    assert routes.remembered() == {}


def test_fixed_policy_takes_the_fixed_route_without_timing(toy, monkeypatch):
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("timed"))
    monkeypatch.setattr(routes.policy, "_state", {"mode": "fixed", "recorded": {}})
    chosen = routes.settle(toy, torch.ones(3))
    assert (chosen.name, chosen.key) == ("good", None) and toy.checked == []
    assert routes.remembered() == {}


def test_no_shape_key_takes_the_fixed_route(toy):
    assert routes.settle(toy, torch.ones(3, dtype=torch.int64)).name == "good"
    assert toy.checked == []


@pytest.mark.parametrize(("env", "value", "expect"), [
    ("SHORTRUN_ROUTE_TOY", "slow", "slow"), ("SHORTRUN_ROUTE", "slow", "slow"),
    ("SHORTRUN_ROUTE_TOY", "wrong", "wrong"),  # a pin is the user's word: not cross-checked
    ("SHORTRUN_ROUTE", "nhwc", "good")])  # another family's route: the fixed one
def test_pins_decide_without_timing_or_checking(toy, monkeypatch, env, value, expect):
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("timed"))
    monkeypatch.setenv(env, value)
    chosen = routes.settle(toy, torch.ones(3))
    assert (chosen.name, chosen.key) == (expect, None) and toy.checked == []
    assert not cache.cache_path().exists()


def test_a_size_rule_decides_without_timing_and_is_recorded(toy, monkeypatch):
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("timed"))
    chosen = routes.settle(Toy(rule="slow"), torch.ones(3))
    assert (chosen.name, chosen.key) == ("slow", "toy|rows=4")
    assert routes.remembered()["toy|rows=4"] == {"name": "slow", "rule": True}
    routes.forget()  # a rule naming a route the cross-check rejected: the candidates race
    monkeypatch.setattr(routes, "measure", lambda name, fn: {"good": 2.0, "slow": 1.0}[name])
    assert routes.settle(Toy(rule="wrong"), torch.ones(3)).name == "slow"


def test_a_replayed_run_takes_its_recorded_route(toy, monkeypatch):
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("timed"))
    monkeypatch.setattr(routes.policy, "_state",
                        {"mode": "replay", "recorded": {"toy|rows=4": "good"}})
    assert routes.settle(toy, torch.ones(3)).name == "good"
    assert routes.remembered()["toy|rows=4"] == {"name": "good", "replayed": True}


def test_the_provenance_record_names_every_route_chosen(toy, tmp_path):
    from shortrun.train.provenance import PROVENANCE, record_routes

    routes.settle(toy, torch.ones(3))
    routes.settle(Toy(rule="good"), torch.ones(30))
    (tmp_path / PROVENANCE).write_text(json.dumps([{"step": 0}]))
    record_routes(tmp_path, "auto", 2)
    [entry] = json.loads((tmp_path / PROVENANCE).read_text())
    assert entry["routes"] == {"policy": "auto", "threads": 2,
                               "chosen": {"toy|rows=32": "good", "toy|rows=4": "slow"}}
    assert routes.policy.read_recorded(str(tmp_path)) == entry["routes"]["chosen"]


def test_route_memoises_by_its_key(toy):
    first = routes.route(toy, ("toy", 3), torch.ones(3))
    assert routes.route(toy, ("toy", 3), torch.ones(3)) is first
    assert routes.MEMO[("toy", 3)] is first


def test_a_one_thread_candidate_shares_its_routes_cross_check(toy):
    """``good@1`` is ``good`` at one thread: the family checks ``good``, once."""
    assert routes.passes(toy, "good@1", torch.ones(3)) and toy.checked == ["good"]
    assert routes.passes(toy, "good", torch.ones(3)) and toy.checked == ["good"]
