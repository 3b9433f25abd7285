"""The one engine that runs every route family: a :class:`Family` declares its candidates, a
float64 cross-check, a shape key and its fixed route; :func:`settle` decides among them once
per shape and :class:`Chosen` runs the choice, never re-timed. The order of the decision and the
race are described in docs/architecture.md, "Routes chosen by measurement".
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import torch

from shortrun.errors import ConfigError
from shortrun.speed import cache, policy

T = TypeVar("T")
REPEATS = 5
BUDGET_S = 0.05  # per candidate and block: stop repeating once it has used this much
ROUNDS = 3  # interleaved rounds: a burst of a neighbour's load can slow one block severalfold
FIXED = "fixed"  # pinned_route's answer for a family the global pin names no route of
# every family and the routes a pin may name (a pin's error lists them all, whichever
# families this process has imported)
FAMILIES: dict[str, tuple[str, ...]] = {"conv": ("nchw", "nhwc"),
                                        "deconv": ("conv", "fold", "gemm"),
                                        "rbm_step": ("torch", "numpy")}
# routes of deleted families (bench/README.md, "Route gains per family"): a global pin of one
# still puts every family on its fixed route, as it did, so old scripts keep running
RETIRED: tuple[str, ...] = ("onednn",)

MEMO: dict[tuple, Chosen] = {}  # per-call memo of the routed families: one dict lookup
_memory: dict[str, dict] = {}  # key -> {"name", "us"} or {"name", "rule"}: this process
_checked: dict[tuple, bool] = {}  # (family, check key) -> the cross-check's verdict


class Family:
    """What a route family declares; the engine (:func:`settle`) does the rest.

    ``name``: cache keys and ``SHORTRUN_ROUTE_<NAME>``; ``routes``: the names a pin may use;
    ``impls``: every route by name (``route@1``: at one thread)."""

    name: str = ""
    routes: tuple[str, ...] = ()
    impls: dict[str, Callable[..., Any]] = {}

    def candidates(self, *args: Any) -> list[str]:
        """The routes (names in :attr:`impls`) that apply to this call."""
        raise NotImplementedError

    def fixed(self, *args: Any) -> str:
        """The route taken when nothing is timed."""
        raise NotImplementedError

    def key(self, *args: Any) -> str | None:
        """The cache key of this call's shape; None: the fixed route."""
        raise NotImplementedError

    def check_key(self, route: str, *args: Any) -> Hashable:
        """What the cross-check's verdict depends on (it runs once per value)."""
        raise NotImplementedError

    def cross_check(self, route: str, *args: Any) -> bool:
        """Whether ``route`` agrees with a float64 reference to the dtype's rounding."""
        raise NotImplementedError

    def rule(self, *args: Any) -> str | None:
        """A route chosen by size, without timing (None: race the candidates)."""
        return None

    def trial(self, route: str, *args: Any) -> Callable[[], object]:
        """The call a race times for ``route`` (default: the route on the call's arguments)."""
        fn = self.impls[route]
        return lambda: fn(*args)


def pinned_route(family: str, choices: tuple[str, ...] | None = None) -> str | None:
    """The route pinned by ``SHORTRUN_ROUTE_<FAMILY>`` or ``SHORTRUN_ROUTE`` (family first);
    :data:`FIXED` for another family's route or ``train.routes: fixed``; else None. An unknown
    name is a one-line :class:`ConfigError` listing the names."""
    choices = choices if choices is not None else FAMILIES[family]
    value = os.environ.get(f"SHORTRUN_ROUTE_{family.upper()}")
    if value:
        if value not in choices:
            raise ConfigError(f"SHORTRUN_ROUTE_{family.upper()}={value} is not a {family} "
                              f"route; use one of {', '.join(choices)}, or unset it to choose "
                              "by measurement")
        return value
    value = os.environ.get("SHORTRUN_ROUTE")
    if not value:
        return FIXED if policy.mode() == "fixed" else None
    if value in choices:
        return value
    known = list(dict.fromkeys(r for rs in (choices, *FAMILIES.values()) for r in rs))
    if value in known or value in RETIRED:
        return FIXED
    raise ConfigError(f"SHORTRUN_ROUTE={value} is not a route; use one of {', '.join(known)}, "
                      "or unset it to choose by measurement")


def settle(family: Family, *args: Any) -> Chosen:
    """The route of ``family`` for this call (docs/architecture.md gives the order)."""
    names = family.candidates(*args)
    pinned = pinned_route(family.name, family.routes)
    if pinned is not None:
        name = pinned if pinned in names else family.fixed(*args)
        return Chosen(name, family.impls)
    key = family.key(*args)
    if key is None:
        return Chosen(family.fixed(*args), family.impls)
    names = [n for n in names if passes(family, n, *args)]
    if len(names) < 2:  # nothing to choose
        return Chosen(names[0] if names else family.fixed(*args), family.impls)
    if policy.recorded(key) in names:
        return Chosen(choose(key, dict.fromkeys(names)), family.impls, key)
    rule = family.rule(*args)
    if rule in names:
        _memory[key] = {"name": rule, "rule": True}
        return Chosen(rule, family.impls, key)
    return Chosen(choose(key, {n: family.trial(n, *args) for n in names}), family.impls, key)


def route(family: Family, memo_key: tuple, *args: Any) -> Chosen:
    """:func:`settle` memoised under ``memo_key`` (all the choice depends on: shapes, dtype,
    threads), so a settled route costs one dict lookup."""
    chosen = MEMO.get(memo_key)
    if chosen is None:
        chosen = MEMO[memo_key] = settle(family, *args)
    return chosen


def passes(family: Family, route: str, *args: Any) -> bool:
    """The family's cross-check of ``route`` (at any thread count: ``route@1`` is ``route``),
    once per check key, on one thread (its arrays are small, so a second thread's wake-ups
    only slow it); any exception fails it."""
    route = route.removesuffix("@1")
    key = (family.name, route, family.check_key(route, *args))
    if key not in _checked:
        check = on_threads(family.cross_check, 1)
        try:
            with torch.random.fork_rng(devices=[]):  # the run's RNG stream is not touched
                _checked[key] = bool(check(route, *args))
        except Exception:  # a kernel or a foreign BLAS may fail in any way: not a route
            _checked[key] = False
    return _checked[key]


def bucket(n: int) -> int:
    """``n`` rounded up to a power of two: one measurement serves nearby sizes."""
    return 1 << max(n - 1, 0).bit_length()


def measure(name: str, fn: Callable[[], object]) -> float:
    """Median seconds of up to :data:`REPEATS` calls of ``fn()`` after a warm-up, fewer past
    :data:`BUDGET_S` (``name``: for the tests' fake timer). The median: a choice must hold
    for the typical call on a shared machine."""
    fn()
    times: list[float] = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if sum(times) > BUDGET_S:
            break
    times.sort()
    return times[(len(times) - 1) // 2]


def threads_of(name: str, threads: int | None = None) -> int:
    """The thread count candidate ``name`` runs at: 1 for ``route@1``, else the current."""
    return 1 if name.endswith("@1") else (threads or torch.get_num_threads())


def on_threads(fn: Callable[..., T], threads: int) -> Callable[..., T]:
    """``fn`` run with torch at ``threads`` threads for the one call."""
    def run(*args: object) -> T:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return fn(*args)
        finally:
            torch.set_num_threads(before)
    return run


def choose(key: str, trials: dict[str, Callable[[], object] | None]) -> str:
    """The fastest of ``trials`` for ``key``: a replayed run's recorded route, this process's
    choice, the cache file's, else measured now (:func:`race`) and remembered in both."""
    replay = policy.recorded(key)
    if replay in trials:
        _memory[key] = {"name": replay, "replayed": True}
        return replay
    hit = _memory.get(key)
    if hit is not None and hit["name"] in trials:
        return hit["name"]
    cached = cache.entries().get(key)
    if isinstance(cached, dict) and cached.get("name") in trials:
        _memory[key] = cached
        return cached["name"]
    return race(key, trials)  # type: ignore[arg-type]


def race(key: str, trials: dict[str, Callable[[], object]]) -> str:
    """Time every trial in :data:`ROUNDS` interleaved rounds; keep the fastest by its median
    block, in memory and in the cache file."""
    blocks: dict[str, list[float]] = {name: [] for name in trials}
    for _ in range(ROUNDS):
        for name, trial in trials.items():
            blocks[name].append(measure(name, trial))
    times = {name: sorted(ts)[(len(ts) - 1) // 2] for name, ts in blocks.items()}
    best = min(times, key=times.__getitem__)
    entry = {"name": best, "us": {n: round(t * 1e6, 1) for n, t in times.items()}}
    _memory[key] = entry
    cache.store(key, entry)
    return best


class Chosen:
    """The route a call settled on: ``chosen(*args)`` runs ``impls[name]``. ``key`` is set when
    the route was decided here rather than pinned or fixed; ``calls`` tells the Trainer which
    routes a step used. Never re-timed: a route that changed mid-run would make the run's
    arithmetic depend on its neighbours' load (docs/architecture.md)."""

    __slots__ = ("name", "fn", "key", "calls")

    def __init__(self, name: str, impls: dict[str, Callable[..., object]],
                 key: str | None = None) -> None:
        self.name, self.fn, self.key, self.calls = name, impls[name], key, 0

    def __call__(self, *args: object) -> object:
        self.calls += 1
        return self.fn(*args)


def remembered() -> dict[str, dict]:
    """This process's choices so far (key -> {"name", ...}): ``shortrun info``, provenance."""
    return dict(_memory)


def forget_machine() -> int:
    """Drop this machine's choices, in memory and in the file (``shortrun info --retime``);
    returns how many the file held."""
    forget()
    return cache.drop_machine()


def forget() -> None:
    """Drop the in-memory choices, cross-check verdicts and file contents (tests; a new pin)."""
    MEMO.clear()
    _memory.clear()
    _checked.clear()
    cache.forget()
