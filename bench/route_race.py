"""How bench/route_gains.py switches a workload between routes and times the candidates: pins
and ``train.routes`` policies set per block, routes a pin cannot name replayed from a record,
interleaved rounds, and gains taken round by round."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

BASE = "plain torch"


@dataclass
class Cand:
    """One way to run a workload: ``fn`` runs one call; ``pins`` and ``policy`` (``auto``,
    ``fixed`` or a recorded file) are set before each of its blocks when ``switch``."""

    label: str
    fn: Callable[[], object]
    family: str | None = None  # the family whose gain this candidate measures
    base: str = BASE
    pins: dict[str, str] = field(default_factory=dict)
    policy: str = "auto"
    switch: bool = True


def use_routes(pins: dict[str, str], policy: str) -> None:
    """Exactly these pins and this ``train.routes`` policy, every memoised route forgotten."""
    from shortrun.speed import engine as routes
    from shortrun.speed import policy as route_policy

    for k in [k for k in os.environ if k.startswith("SHORTRUN_ROUTE")]:
        del os.environ[k]
    for fam, route in pins.items():
        os.environ[f"SHORTRUN_ROUTE_{fam.upper()}"] = route
    route_policy.use(policy)
    routes.forget()


def replay_file(chosen: dict[str, str]) -> str:
    """A provenance record naming ``chosen`` (key -> route), for ``train.routes`` replay."""
    fd, path = tempfile.mkstemp(prefix="route-gains-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"routes": {"chosen": chosen}}, f)
    atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


def discovered(family: str) -> dict[str, list[str]]:
    """The keys of ``family`` raced so far in this process and each key's candidates."""
    from shortrun.speed import engine as routes

    return {k: list(v.get("us", {})) for k, v in routes.remembered().items()
            if k.split("|")[0] == family}


def others(family: str, plain: str, pins: dict[str, str]) -> list[tuple[str, dict, str]]:
    """(route, pins, policy) for every raced route of ``family`` other than ``plain``: by pin
    where the route has a pin name, else by replaying a record of it on every raced key."""
    from shortrun.speed import engine as routes

    keys = discovered(family)
    names = sorted({n for ns in keys.values() for n in ns} - {plain})
    out = []
    for name in names:
        if name in routes.FAMILIES[family]:
            out.append((name, {**pins, family: name}, "auto"))
        else:  # the family's own pin would win over the record
            unpinned = {f: r for f, r in pins.items() if f != family}
            out.append((name, unpinned, replay_file({k: name for k, ns in keys.items()
                                                     if name in ns})))
    return out


def chosen(prefix: str) -> dict[str, str]:
    """Each settled key of this process with ``route (times in µs, or how it was chosen)``."""
    from shortrun.speed import engine as routes

    def how(v: dict) -> str:
        times = ", ".join(f"{n} {t:g}" for n, t in v.get("us", {}).items())
        return times or ("size rule" if v.get("rule") else "replayed")

    return {k: f"{v['name']} ({how(v)})" for k, v in routes.remembered().items()
            if k.startswith(prefix)}


def race(cands: list[Cand], rounds: int, calls: int) -> dict[str, list[float]]:
    """Seconds per call of each candidate, one block of ``calls`` per round, rotated order."""
    import torch
    from threadpoolctl import threadpool_limits

    n = torch.get_num_threads()
    times: dict[str, list[float]] = {c.label: [] for c in cands}
    for r in range(rounds):
        for c in cands[r % len(cands):] + cands[:r % len(cands)]:
            # every block starts at the caller's threads (a NumPy@1 route caps NumPy's pool)
            torch.set_num_threads(n)
            threadpool_limits(limits=n, user_api="blas")
            if c.switch or r == 0:
                use_routes(c.pins, c.policy)
                c.fn()
            t0 = time.perf_counter()
            for _ in range(calls):
                c.fn()
            times[c.label].append((time.perf_counter() - t0) / calls)
    use_routes({}, "auto")
    return times


def summary(name: str, threads: int, cands: list[Cand], times: dict[str, list[float]],
            calls: int, routes_seen: dict[str, str]) -> dict:
    """One workload's record: each candidate's seconds per call over the rounds and its gains
    over its baseline, round by round."""
    rows = []
    for c in cands:
        ts = times[c.label]
        base = times.get(c.base)
        gains = [b / t for b, t in zip(base, ts, strict=True)] if base and c.label != c.base else []
        rows.append({"label": c.label, "family": c.family, "base": c.base, "times": ts,
                     "gains": gains})
    return {"name": name, "threads": threads, "calls": calls, "cands": rows,
            "routes": routes_seen}
