"""Which implementation runs a product: chosen by timing the candidates on this machine.

A route that wins on one CPU loses on another (oneDNN against MKL, say), and a product of
100×64×20 runs fastest on one thread while 100×784×500 wants them all (figures: bench/README,
"Measurements behind the speed layer"). So :func:`choose` times every candidate at first use
for the actual shape bucket, dtype and thread count (best of a few repetitions), keeps the
winner in memory and in a JSON cache (:func:`cache_path`), keyed by CPU model, torch version,
thread count, product family and shape bucket. The cache only ever holds a *choice among
routes that all passed the same float64 cross-check*, so deleting or corrupting it costs a
re-measurement, never correctness; a corrupt file is ignored with one warning.

Five things keep a choice honest on a shared, loaded machine: each candidate's time is the
*median* of its repetitions; the candidates are timed in :data:`ROUNDS` interleaved rounds and
each keeps its median round, so a burst of load during one turn does not decide; a candidate on
more threads wins only when it beats the best one-thread candidate by :data:`THREAD_MARGIN` (a
second thread's wake-up costs a scheduler slice whenever the other cores are busy); a chosen
route is watched (:class:`Chosen`): every :data:`SAMPLE_EVERY`-th call is timed, and after
:data:`SLOW_SAMPLES` samples in a row over :data:`SLOW_FACTOR` × the recorded time the
candidates are timed once more; and a choice one race made is provisional: after
:data:`CONFIRM_AFTER` calls the candidates race again and each keeps the lower of its two times
(load only slows a candidate), after which the entry (``races``: :data:`RACES`) is settled.

Families and their routes (:data:`FAMILIES`): ``rbm`` (torch|onednn|numpy, the RBM GEMMs,
:mod:`shortrun.products`), ``mlp`` (torch|onednn, the MLP energy's fast pass,
:mod:`shortrun.energies.mlp`), ``conv`` (nchw|nhwc, the LEBM generator's layout,
:mod:`shortrun.models.lebm_nets`), ``deconv`` (conv|fold|gemm, the generator's first and
last layers, :mod:`shortrun.models.fold_routes`). ``SHORTRUN_ROUTE_<FAMILY>=ROUTE`` (e.g.
``SHORTRUN_ROUTE_MLP=torch``) pins one family; ``SHORTRUN_ROUTE=ROUTE`` pins every family that
has that route and puts the others on their fixed, pre-measurement route (:func:`pinned_route`),
as ``train.routes: fixed`` puts every family (:mod:`shortrun.route_policy`).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch

from shortrun import route_policy
from shortrun.errors import ConfigError
from shortrun.hardware import cpu_machine

T = TypeVar("T")
REPEATS = 5
BUDGET_S = 0.05  # per candidate: stop repeating once a candidate has used this much
# candidates are timed in this many interleaved rounds, each by its median block: on a virtual
# machine a burst of a neighbour's load can slow one 20-ms block severalfold
ROUNDS = 3
# seconds of rest before timing the candidates of another thread pool (OpenBLAS's workers spin
# for about 0.1-0.3 s after their last product; :func:`_measure_all`)
SETTLE_S = 0.3
# a multi-thread candidate must be this much faster than one thread (a larger margin kept a
# Langevin pass on one thread that two threads ran faster)
THREAD_MARGIN = 1.25
SAMPLE_EVERY = 64  # a watched route times one call in this many
SLOW_FACTOR = 3.0  # a sampled call this many times over the recorded time is slow ...
SLOW_SAMPLES = 3  # ... and this many slow samples in a row trigger one re-measurement
CONFIRM_AFTER = 4 * SAMPLE_EVERY  # a watched route called this often races once more ...
RACES = 2  # ... until its entry merges this many races
FIXED = "fixed"  # pinned_route's answer for a family the global pin names no route of
FAMILIES: dict[str, tuple[str, ...]] = {"rbm": ("torch", "onednn", "numpy"),
                                        "mlp": ("torch", "onednn"),
                                        "conv": ("nchw", "nhwc"),
                                        "deconv": ("conv", "fold", "gemm"),
                                        "rbm_step": ("torch", "numpy")}

# (family, dtype, shapes, ..., threads, oneDNN on?) -> Chosen: the per-call memo of the routed
# families, so a settled route costs one dict lookup
MEMO: dict[tuple, Chosen] = {}
_memory: dict[str, dict] = {}  # key -> {"route", "threads", "us"}: this process's choices
_disk: dict[str, dict] | None = None  # this machine's entries of the cache file, once read


def cache_path() -> Path:
    """``$XDG_CACHE_HOME/shortrun/routes.json``, else ``~/.cache/shortrun/routes.json``."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "shortrun" / "routes.json"


def machine_key() -> str:
    """What a cached choice is valid for beyond its own key: the CPU (model and vector units)
    and the torch build."""
    return f"{cpu_machine()} | torch {torch.__version__}"


def pinned_route(family: str, choices: tuple[str, ...] | None = None) -> str | None:
    """The route pinned by ``SHORTRUN_ROUTE_<FAMILY>`` or ``SHORTRUN_ROUTE`` (family first),
    None when neither is set, or :data:`FIXED` when ``SHORTRUN_ROUTE`` names a route of another
    family only (``SHORTRUN_ROUTE=onednn`` puts the conv layout on its fixed NHWC). A name no
    family knows is a one-line :class:`ConfigError` listing the names."""
    choices = choices if choices is not None else FAMILIES[family]
    value = os.environ.get(f"SHORTRUN_ROUTE_{family.upper()}")
    if value:
        if value not in choices:
            raise ConfigError(f"SHORTRUN_ROUTE_{family.upper()}={value} is not a {family} "
                              f"route; use one of {', '.join(choices)}, or unset it to choose "
                              "by measurement")
        return value
    value = os.environ.get("SHORTRUN_ROUTE")
    if not value:  # train.routes: fixed pins every family to its fixed route
        return FIXED if route_policy.mode() == "fixed" else None
    if value in choices:
        return value
    known = list(dict.fromkeys(r for rs in (choices, *FAMILIES.values()) for r in rs))
    if value in known:
        return FIXED
    raise ConfigError(f"SHORTRUN_ROUTE={value} is not a route; use one of {', '.join(known)}, "
                      "or unset it to choose by measurement")


def bucket(n: int) -> int:
    """``n`` rounded up to a power of two: one measurement serves nearby sizes."""
    return 1 << max(n - 1, 0).bit_length()


def measure(name: str, fn: Callable[[], object]) -> float:
    """Median seconds of up to :data:`REPEATS` calls of ``fn()`` after one warm-up call, fewer
    once they used :data:`BUDGET_S` (``name`` is for the tests, which replace this function
    with a fake timer). The median, not the best: a choice must hold for the typical call on
    a machine other processes share."""
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


def pick(times: dict[str, float]) -> str:
    """The fastest candidate, except that one on more threads must beat the fastest
    one-thread candidate by :data:`THREAD_MARGIN` (module docstring)."""
    best = min(times, key=times.__getitem__)
    single = [n for n in times if threads_of(n) == 1]
    if single and threads_of(best) > 1:
        best_single = min(single, key=times.__getitem__)
        if times[best_single] <= THREAD_MARGIN * times[best]:
            return best_single
    return best


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


def _read_disk() -> dict[str, dict]:
    global _disk
    if _disk is None:
        _disk = _load_file().get(machine_key(), {})
    return _disk


def _load_file() -> dict[str, dict]:
    path = cache_path()
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise ValueError("not a mapping of machines to choices")
        return data
    except (OSError, ValueError) as exc:
        warnings.warn(f"ignoring the route cache {path} ({exc}); the routes are measured "
                      "again and the file rewritten (it is safe to delete)", stacklevel=4)
        return {}


def _write_disk(key: str, entry: dict) -> None:
    """Merge one choice into the file (read, update, atomic replace); a read-only cache
    directory only means the choice is measured again in the next process."""
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the one warning was given on the first read
            data = _load_file()
        data.setdefault(machine_key(), {})[key] = entry
        _replace_file(path, data)
    except OSError:
        pass


def _replace_file(path: Path, data: dict[str, dict]) -> None:
    """Write ``data`` as the cache file in one atomic replace (a reader never sees half)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".routes-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def choose(key: str, candidates: dict[str, Callable[[], object]]) -> str:
    """The fastest of ``candidates`` (name -> a call running the product) for ``key``: from
    memory, else from the cache file, else measured now and remembered in both; a replayed
    run's recorded route first (:mod:`shortrun.route_policy`)."""
    replay = route_policy.recorded(key)
    if replay in candidates:
        _memory[key] = {"name": replay, "replayed": True}
        return replay
    hit = _memory.get(key)
    if hit is not None and hit["name"] in candidates:
        return hit["name"]
    cached = _read_disk().get(key)
    if isinstance(cached, dict) and cached.get("name") in candidates:
        _memory[key] = cached
        return cached["name"]
    return _measure_all(key, candidates)


def thread_pool(name: str) -> str:
    """Which thread pool candidate ``name`` runs on: NumPy's BLAS (``numpy``, ``numpy@1``) or
    torch's (every other route)."""
    return "blas" if name.startswith("numpy") else "torch"


def _measure_all(key: str, candidates: dict[str, Callable[[], object]],
                 previous: dict | None = None) -> str:
    """Time every candidate in :data:`ROUNDS` interleaved rounds (one :func:`measure` block
    per candidate per round) and keep the fastest by its median block; remember it. With
    ``previous`` (the entry of an earlier race of the same key) each candidate keeps the lower
    of its two times and the entry counts one race more (the module docstring's fifth rule).

    Candidates on different thread pools are timed pool by pool, each pool's rounds after
    :data:`SETTLE_S` of idleness when more than one thread runs: OpenBLAS's workers keep
    spinning for a while after a product, and a torch candidate timed among them ran several
    times slow and lost to a slower NumPy route."""
    pools: dict[str, list[str]] = {}
    for name in candidates:
        pools.setdefault(thread_pool(name), []).append(name)
    settle = len(pools) > 1 and torch.get_num_threads() > 1
    blocks: dict[str, list[float]] = {name: [] for name in candidates}
    for names in pools.values():
        if settle:
            time.sleep(SETTLE_S)
        for _ in range(ROUNDS):
            for name in names:
                blocks[name].append(measure(name, candidates[name]))
    times = {name: sorted(ts)[(len(ts) - 1) // 2] for name, ts in blocks.items()}
    races = 1
    if previous is not None:
        before = previous.get("us", {})
        times = {n: min(t, before[n] / 1e6) if isinstance(before.get(n), (int, float)) else t
                 for n, t in times.items()}
        races += races_of(previous)
    best = pick(times)
    entry = {"name": best, "us": {n: round(t * 1e6, 1) for n, t in times.items()},
             "races": races}
    _memory[key] = entry
    _read_disk()[key] = entry
    _write_disk(key, entry)
    return best


def forget_machine() -> int:
    """Drop this machine's choices, in memory and in the cache file (the entries under
    :func:`machine_key`; other machines' stay), so every route is timed afresh at its next
    use; returns how many the file held. For choices made while the machine was busy: a
    settled entry (two races) is not raced again, and a watched route re-times itself only
    when it turns slow, never when a rejected candidate would have become faster.
    ``shortrun info --retime``."""
    forget()
    path = cache_path()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a corrupt file is dropped below in any case
        data = _load_file()
    dropped = data.pop(machine_key(), {})
    if path.exists():
        try:
            _replace_file(path, data)
        except OSError as exc:
            raise ConfigError(f"cannot rewrite the route cache {path} ({exc}); delete the file "
                              "by hand (it is safe to delete)") from exc
    return len(dropped)


def races_of(entry: dict | None) -> int:
    """How many races an entry's times merge (1 for the entries cached before it counted)."""
    races = (entry or {}).get("races", 1)
    return races if isinstance(races, int) and races > 0 else 1


def recorded_seconds(key: str) -> float | None:
    """The measured time of ``key``'s chosen route (None when it was not measured)."""
    entry = _memory.get(key)
    try:
        return float(entry["us"][entry["name"]]) / 1e6  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        return None


class Chosen:
    """The route a key settled on, called through: ``chosen(*args)`` runs ``impls[name]``.

    When the route was measured (``key`` given) and is watched (``watch``, unless its calls
    cannot be repeated on their arguments), every :data:`SAMPLE_EVERY`-th call is timed;
    :data:`SLOW_SAMPLES` samples in a row over :data:`SLOW_FACTOR` × the recorded time (a
    choice cached while the machine was idle, or measured while it was loaded) re-time every
    candidate on that call's arguments, once per process, and replace the cached choice. A
    watched route whose entry merges fewer than :data:`RACES` races is raced once more on the
    arguments of its :data:`CONFIRM_AFTER`-th call (:meth:`confirm`). Every re-timed route
    passed the same cross-check (it is one of ``impls``), so switching changes only the
    summation order.
    """

    __slots__ = ("name", "fn", "impls", "key", "expected", "calls", "slow", "remeasured",
                 "provisional")

    def __init__(self, name: str, impls: dict[str, Callable[..., object]],
                 key: str | None = None, watch: bool = True) -> None:
        self.name, self.fn, self.impls, self.key = name, impls[name], impls, key
        self.expected = recorded_seconds(key) if key is not None and watch else None
        self.calls, self.slow, self.remeasured = 0, 0, False
        self.provisional = (self.expected is not None
                            and races_of(_memory.get(key)) < RACES)  # type: ignore[arg-type]

    def __call__(self, *args: object) -> object:
        self.calls += 1  # also tells the Trainer which routes a step used
        if self.expected is None or self.calls % SAMPLE_EVERY:
            return self.fn(*args)
        if self.provisional and self.calls >= CONFIRM_AFTER:
            self.confirm(args)
            return self.fn(*args)
        t0 = time.perf_counter()
        out = self.fn(*args)
        self.observe(time.perf_counter() - t0, args)
        return out

    def observe(self, seconds: float, args: tuple) -> None:
        """Count a sampled call's time; re-measure after enough slow ones in a row."""
        assert self.expected is not None and self.key is not None
        self.slow = self.slow + 1 if seconds > SLOW_FACTOR * self.expected else 0
        if self.slow < SLOW_SAMPLES:
            return
        self.name = _measure_all(self.key, _calls_on(self.impls, args))
        self.fn = self.impls[self.name]
        self.expected, self.remeasured = None, True  # once per process: no re-measure loops

    def confirm(self, args: tuple) -> None:
        """Race the candidates once more on ``args`` and merge the times with the first
        race's (:func:`_measure_all` with ``previous``); the route may change. Several routes
        share a key (nearby shapes fall in one bucket): when another one settled the entry
        first, this one takes its choice instead of racing a third time."""
        assert self.key is not None
        self.provisional = False
        entry = _memory.get(self.key)
        if races_of(entry) >= RACES and entry["name"] in self.impls:  # type: ignore[index]
            self.name = entry["name"]  # type: ignore[index]
        else:
            self.name = _measure_all(self.key, _calls_on(self.impls, args), previous=entry)
        self.fn = self.impls[self.name]
        self.expected = recorded_seconds(self.key)


def _calls_on(impls: dict[str, Callable[..., object]],
              args: tuple) -> dict[str, Callable[[], object]]:
    """Each of ``impls`` as a call without arguments, on ``args`` (what the races time)."""
    return {n: (lambda f=f: f(*args)) for n, f in impls.items()}


def choose_route(key: str, impls: dict[str, Callable[..., object]], *args: object) -> Chosen:
    """:func:`choose` among ``impls`` called on ``args``, as a watched :class:`Chosen`."""
    if len(impls) == 1:
        return Chosen(next(iter(impls)), impls)
    name = choose(key, _calls_on(impls, args))
    return Chosen(name, impls, key)


def remembered() -> dict[str, dict]:
    """This process's choices so far (key -> {"name", "us"}), for ``shortrun info``."""
    return dict(_memory)


def forget() -> None:
    """Drop the in-memory choices and the cached file contents (tests; a changed cache dir)."""
    global _disk
    MEMO.clear()
    _memory.clear()
    _disk = None
