"""``shortrun.speed.engine``: the fastest candidate wins, the choice survives a new process
through the cache file, a corrupt file costs one warning, and a pin skips the timing; a toy
family shows the engine's decisions (cross-check, fixed fallback, pins, rule, replay, the
provenance record) without any real product."""

from __future__ import annotations

import json
import types
import warnings

import pytest
import torch

from shortrun.errors import ConfigError
from shortrun.speed import cache, products
from shortrun.speed import engine as routes


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
    assert sorted(calls) == sorted(["numpy", "onednn", "torch"] * routes.ROUNDS)
    timed = len(calls)
    assert _run_product() == "numpy" and len(calls) == timed  # remembered, not re-timed
    times.update(torch=0.5)
    routes.forget()  # a new process: the cache file answers, the timer is not called
    assert _run_product() == "numpy" and len(calls) == timed


def test_cache_round_trip(fake_timer):
    _run_product()
    data = json.loads(cache.cache_path().read_text())
    [(key, entry)] = data[cache.machine_key()].items()
    assert key == "rbm|float32|threads=1|128x64x32|NN|bias"
    assert entry == {"name": "numpy", "us": {"numpy": 1e6, "onednn": 2e6, "torch": 3e6},
                     "races": 1}
    assert routes.remembered()[key] == entry


def test_forgetting_this_machine_drops_its_choices_and_keeps_other_machines(fake_timer):
    times, calls = fake_timer
    assert _run_product() == "numpy"
    path = cache.cache_path()
    data = json.loads(path.read_text())
    data["another CPU | torch 0"] = {"k": {"name": "torch", "us": {"torch": 1.0}}}
    path.write_text(json.dumps(data))
    routes.forget()
    timed = len(calls)
    times.update(torch=0.5)  # the machine changed since the choice was cached
    assert _run_product() == "numpy" and len(calls) == timed  # the cache answers ...
    assert routes.forget_machine() == 1
    left = json.loads(path.read_text())
    assert cache.machine_key() not in left and "another CPU | torch 0" in left
    assert _run_product() == "torch" and len(calls) == timed + 3 * routes.ROUNDS  # ... timed
    assert routes.forget_machine() == 1 and routes.forget_machine() == 0


def test_forgetting_without_a_cache_file_writes_none(fake_timer):
    assert routes.forget_machine() == 0 and not cache.cache_path().exists()


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
    path = cache.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    with pytest.warns(UserWarning, match=r"ignoring the route cache .*routes\.json") as got:
        assert _run_product() == "numpy"
        a, b = torch.rand(100, 784), torch.rand(784, 500)
        products.route_for(a, b)  # a second shape: no second warning
    assert len(got) == 1 and len(calls) == 6 * routes.ROUNDS
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
    assert not cache.cache_path().exists()


def test_the_family_pin_beats_the_global_one(monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE_RBM", "numpy")
    assert routes.pinned_route("rbm", products.ROUTES) == "numpy"


def test_an_unknown_pin_names_the_routes(monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE", "mkl")
    with pytest.raises(ConfigError) as err:
        _run_product()
    assert str(err.value) == ("SHORTRUN_ROUTE=mkl is not a route; use one of torch, onednn, "
                              "numpy, nchw, nhwc, conv, fold, gemm, or unset it to choose "
                              "by measurement")


def test_an_unknown_family_pin_names_that_familys_routes(monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE_MLP", "numpy")
    with pytest.raises(ConfigError) as err:
        routes.pinned_route("mlp")
    assert str(err.value) == ("SHORTRUN_ROUTE_MLP=numpy is not a mlp route; use one of torch, "
                              "onednn, or unset it to choose by measurement")


@pytest.mark.parametrize(("pin", "family", "expect"), [
    ("onednn", "rbm", "onednn"), ("onednn", "mlp", "onednn"), ("onednn", "conv", routes.FIXED),
    ("numpy", "mlp", routes.FIXED), ("nchw", "conv", "nchw"), ("nchw", "rbm", routes.FIXED)])
def test_the_global_pin_fixes_the_families_it_names_no_route_of(monkeypatch, pin, family,
                                                                expect):
    monkeypatch.delenv("SHORTRUN_ROUTE_CONV", raising=False)
    monkeypatch.delenv("SHORTRUN_ROUTE_MLP", raising=False)
    monkeypatch.setenv("SHORTRUN_ROUTE", pin)
    assert routes.pinned_route(family) == expect


def test_a_second_thread_must_win_by_the_margin():
    torch.set_num_threads(2)
    m = routes.THREAD_MARGIN
    assert routes.pick({"torch": 1.0, "torch@1": 0.99 * m, "onednn@1": m}) == "torch@1"
    assert routes.pick({"torch": 1.0, "torch@1": 1.01 * m}) == "torch"
    assert routes.pick({"torch": 1.0, "onednn": 2.0}) == "torch"  # no one-thread candidate
    assert routes.pick({"onednn@1": 2.0, "torch@1": 1.0, "torch": 0.1}) == "torch"
    torch.set_num_threads(1)  # at one thread every candidate is a one-thread one
    assert routes.pick({"torch": 1.0, "torch@1": 1.2}) == "torch"


def _clock(monkeypatch, ticks):
    """routes' ``time.perf_counter`` reads ``ticks`` (the real clock stays untouched)."""
    ticks = iter(ticks)
    monkeypatch.setattr(routes, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))


def test_the_timer_takes_the_median(monkeypatch):
    _clock(monkeypatch, [0, 5, 0, 1, 0, 3, 0, 2, 0, 4])  # calls of 5, 1, 3, 2 and 4 s
    monkeypatch.setattr(routes, "BUDGET_S", 100.0)
    assert routes.measure("x", lambda: None) == 3


# --- the re-measure of a route that runs far slower than recorded --------------------------

def _watched(monkeypatch, times):
    """A Chosen among two impls, measured with a fake timer reading ``times``."""
    monkeypatch.setattr(routes, "measure", lambda name, fn: (fn(), times[name])[1])
    calls: list[str] = []
    impls = {n: (lambda x, n=n: calls.append(n) or x) for n in ("fast", "slow")}
    name = routes.choose("test|key", {n: (lambda f=f: f(7)) for n, f in impls.items()})
    return routes.Chosen(name, impls, "test|key"), calls


def _call_sampled(chosen, seconds, monkeypatch, n=1):
    """``n`` sampled calls, each observed to take ``seconds`` (no real clock involved)."""
    for _ in range(n):
        chosen.calls = routes.SAMPLE_EVERY - 1
        _clock(monkeypatch, [0.0, seconds])
        assert chosen(7) == 7


def test_a_route_running_far_over_its_record_is_measured_again_once(monkeypatch):
    times = {"fast": 1.0, "slow": 2.0}
    chosen, calls = _watched(monkeypatch, times)
    assert chosen.name == "fast" and chosen.expected == 1.0
    _call_sampled(chosen, 3.5, monkeypatch, routes.SLOW_SAMPLES - 1)
    assert chosen.name == "fast" and not chosen.remeasured
    times.update(fast=9.0)  # the machine changed: "fast" is now the slow one
    _call_sampled(chosen, 3.5, monkeypatch)
    assert chosen.remeasured and chosen.name == "slow"
    entry = json.loads(cache.cache_path().read_text())[cache.machine_key()]["test|key"]
    assert entry == {"name": "slow", "us": {"fast": 9e6, "slow": 2e6}, "races": 1}
    timed = len(calls)
    _call_sampled(chosen, 100.0, monkeypatch, 2 * routes.SLOW_SAMPLES)
    assert len(calls) == timed + 2 * routes.SLOW_SAMPLES  # only the calls: no second re-measure


# --- the second race of a provisional choice ----------------------------------------------

def _call_until_confirmed(chosen, monkeypatch):
    """Calls up to the :data:`routes.CONFIRM_AFTER`-th, the sampled ones observed at 1 s."""
    while chosen.calls < routes.CONFIRM_AFTER:
        _clock(monkeypatch, [0.0, 1.0])
        assert chosen(7) == 7


def test_a_choice_one_race_made_races_again_and_keeps_each_candidates_lower_time(monkeypatch):
    times = {"fast": 3.0, "slow": 2.0}  # "fast" was slowed by load during the first race
    chosen, calls = _watched(monkeypatch, times)
    assert chosen.name == "slow" and chosen.provisional
    times.update(fast=1.0, slow=4.0)  # the load moved to "slow" in the second race
    chosen.calls = routes.CONFIRM_AFTER - 2
    _call_until_confirmed(chosen, monkeypatch)
    assert chosen.name == "fast" and not chosen.provisional and chosen.expected == 1.0
    entry = json.loads(cache.cache_path().read_text())[cache.machine_key()]["test|key"]
    assert entry == {"name": "fast", "us": {"fast": 1e6, "slow": 2e6}, "races": 2}
    timed = len(calls)
    chosen.calls = 0
    _call_until_confirmed(chosen, monkeypatch)
    assert len(calls) == timed + routes.CONFIRM_AFTER  # only the calls: no third race


def test_no_second_race_before_the_confirming_call(monkeypatch):
    times = {"fast": 3.0, "slow": 2.0}
    chosen, _ = _watched(monkeypatch, times)
    times.update(fast=1.0)
    chosen.calls = 0
    for _ in range(routes.CONFIRM_AFTER - 1):
        _clock(monkeypatch, [0.0, 1.0])
        chosen(7)
    assert chosen.name == "slow" and chosen.provisional


def test_a_settled_entry_is_not_raced_again_in_a_new_process(monkeypatch):
    times = {"fast": 1.0, "slow": 2.0}
    chosen, _ = _watched(monkeypatch, times)
    chosen.calls = routes.CONFIRM_AFTER - 2
    _call_until_confirmed(chosen, monkeypatch)
    routes.forget()  # a new process: the cache file answers with the settled entry
    times.update(fast=9.0)
    again, _ = _watched(monkeypatch, times)
    assert again.name == "fast" and not again.provisional


def test_an_entry_cached_before_races_were_counted_is_raced_once_more(monkeypatch):
    path = cache.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({cache.machine_key(): {
        "test|key": {"name": "slow", "us": {"fast": 3e6, "slow": 2e6}}}}))
    routes.forget()
    times = {"fast": 1.0, "slow": 2.0}
    chosen, _ = _watched(monkeypatch, times)
    assert chosen.name == "slow" and chosen.provisional
    chosen.calls = routes.CONFIRM_AFTER - 2
    _call_until_confirmed(chosen, monkeypatch)
    assert chosen.name == "fast"
    assert routes.remembered()["test|key"]["races"] == 2


def test_a_route_whose_key_another_route_settled_takes_that_choice_without_racing(monkeypatch):
    times = {"fast": 3.0, "slow": 2.0}
    first, calls = _watched(monkeypatch, times)
    second = routes.Chosen(first.name, first.impls, "test|key")  # a nearby shape, same bucket
    times.update(fast=1.0)
    first.calls = routes.CONFIRM_AFTER - 2
    _call_until_confirmed(first, monkeypatch)
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("raced a third time"))
    second.calls = routes.CONFIRM_AFTER - 2
    _call_until_confirmed(second, monkeypatch)
    assert second.name == "fast" and not second.provisional and second.expected == 1.0
    assert routes.remembered()["test|key"]["races"] == 2


def test_an_unwatched_route_is_never_raced_again(monkeypatch):
    monkeypatch.setattr(routes, "measure", lambda name, fn: (fn(), {"a": 2.0, "b": 1.0}[name])[1])
    name = routes.choose("test|unwatched", {"a": lambda: 0, "b": lambda: 0})
    chosen = routes.Chosen(name, {"a": lambda x: x, "b": lambda x: x}, "test|unwatched",
                           watch=False)
    _clock(monkeypatch, [])  # any reading of the clock fails
    for _ in range(routes.CONFIRM_AFTER + routes.SAMPLE_EVERY):
        chosen(7)
    assert not chosen.provisional and chosen.name == "b"


def test_a_normal_sample_resets_the_slow_count(monkeypatch):
    chosen, _ = _watched(monkeypatch, {"fast": 1.0, "slow": 2.0})
    for _ in range(3):
        _call_sampled(chosen, 3.5, monkeypatch, routes.SLOW_SAMPLES - 1)
        _call_sampled(chosen, 2.9, monkeypatch)  # under SLOW_FACTOR × 1.0
    assert not chosen.remeasured and chosen.slow == 0


def test_only_every_nth_call_is_timed(monkeypatch):
    chosen, calls = _watched(monkeypatch, {"fast": 1.0, "slow": 2.0})
    _clock(monkeypatch, [])  # any reading of the clock fails
    for _ in range(routes.SAMPLE_EVERY - 1):
        chosen(7)
    assert chosen.calls == routes.SAMPLE_EVERY - 1


def test_a_pinned_or_cached_without_times_route_is_not_watched(monkeypatch):
    chosen = routes.Chosen("a", {"a": lambda: 1})
    _clock(monkeypatch, [])  # any reading of the clock fails
    for _ in range(3 * routes.SAMPLE_EVERY):
        chosen()
    assert chosen.expected is None


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


def test_candidates_of_each_thread_pool_are_timed_after_the_other_pool_rests(monkeypatch):
    """At 2 threads, torch's candidates are timed together and NumPy's together, each pool
    after SETTLE_S of rest (OpenBLAS's spinning workers slowed a torch candidate 3x)."""
    events: list[str] = []
    monkeypatch.setattr(routes, "ROUNDS", 2)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(routes.time, "sleep", lambda s: events.append(f"rest {s}"))
    monkeypatch.setattr(routes, "measure", lambda name, fn: (events.append(name),
                                                             {"numpy": 1.0}.get(name, 2.0))[1])
    calls = {n: (lambda: None) for n in ("torch", "numpy", "numpy@1")}
    assert routes.race("k", calls) == "numpy"
    rest = f"rest {routes.SETTLE_S}"
    assert events == [rest, "torch", "torch", rest, "numpy", "numpy@1", "numpy", "numpy@1"]
    events.clear()
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)  # no other pool's workers spin
    routes.race("k1", calls)
    assert rest not in events
    events.clear()
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    routes.race("k2", {n: (lambda: None) for n in ("torch", "onednn")})  # one pool
    assert events == ["torch", "onednn", "torch", "onednn"]
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
def toy(monkeypatch):
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.setitem(routes.FAMILIES, "toy", Toy.routes)
    times = {"good": 2.0, "wrong": 0.5, "slow": 1.0}
    monkeypatch.setattr(routes, "measure", lambda name, fn: (fn(), times[name])[1])
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


def test_a_size_rule_decides_without_timing_and_is_recorded(toy, monkeypatch):
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("timed"))
    chosen = routes.settle(Toy(rule="slow"), torch.ones(3))
    assert (chosen.name, chosen.key, chosen.expected) == ("slow", "toy|rows=4", None)
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
