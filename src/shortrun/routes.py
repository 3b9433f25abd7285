"""Which implementation runs a product: chosen by timing the candidates on this machine.

A route that wins on one CPU loses on another (issue 16: oneDNN is about 2× MKL on the AMD EPYC
the benches ran on, 0.74× on an Intel Xeon), and a product of 100×64×20 runs fastest on one
thread while 100×784×500 wants them all. So :func:`choose` times every candidate at first use
for the actual shape bucket, dtype and thread count (best of a few repetitions), keeps the
winner in memory and in a JSON cache (:func:`cache_path`), keyed by CPU model, torch version,
thread count, product family and shape bucket. The cache only ever holds a *choice among
routes that all passed the same float64 cross-check*, so deleting or corrupting it costs a
re-measurement, never correctness; a corrupt file is ignored with one warning.

``SHORTRUN_ROUTE=torch|onednn|numpy`` pins a route for every family, ``SHORTRUN_ROUTE_<FAMILY>``
(e.g. ``SHORTRUN_ROUTE_RBM``) for one (:func:`pinned_route`).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from shortrun.errors import ConfigError
from shortrun.hardware import cpu_model

REPEATS = 5
BUDGET_S = 0.05  # per candidate: stop repeating once a candidate has used this much

# (family, dtype, shapes, strides, bias?, threads, oneDNN on?) -> route name: the per-call memo
# of the products module, so a cached product costs one dict lookup
MEMO: dict[tuple, str] = {}
_memory: dict[str, dict] = {}  # key -> {"route", "threads", "us"}: this process's choices
_disk: dict[str, dict] | None = None  # this machine's entries of the cache file, once read


def cache_path() -> Path:
    """``$XDG_CACHE_HOME/shortrun/routes.json``, else ``~/.cache/shortrun/routes.json``."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "shortrun" / "routes.json"


def machine_key() -> str:
    """What a cached choice is valid for beyond its own key: the CPU and the torch build."""
    return f"{cpu_model()} | torch {torch.__version__}"


def pinned_route(family: str, choices: tuple[str, ...]) -> str | None:
    """The route pinned by ``SHORTRUN_ROUTE_<FAMILY>`` or ``SHORTRUN_ROUTE`` (family first)."""
    for var in (f"SHORTRUN_ROUTE_{family.upper()}", "SHORTRUN_ROUTE"):
        value = os.environ.get(var)
        if value:
            if value not in choices:
                raise ConfigError(f"{var}={value} is not a route; use one of "
                                  f"{', '.join(choices)}, or unset it to choose by measurement")
            return value
    return None


def bucket(n: int) -> int:
    """``n`` rounded up to a power of two: one measurement serves nearby sizes."""
    return 1 << max(n - 1, 0).bit_length()


def measure(name: str, fn: Callable[[], object]) -> float:
    """Best-of-:data:`REPEATS` seconds of ``fn()`` after one warm-up call (``name`` is for the
    tests, which replace this function with a fake timer)."""
    fn()
    best = float("inf")
    spent = 0.0
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best, spent = min(best, dt), spent + dt
        if spent > BUDGET_S:
            break
    return best


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
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".routes-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass


def choose(key: str, candidates: dict[str, Callable[[], object]]) -> str:
    """The fastest of ``candidates`` (name -> a call running the product) for ``key``: from
    memory, else from the cache file, else measured now and remembered in both."""
    hit = _memory.get(key)
    if hit is not None and hit["name"] in candidates:
        return hit["name"]
    cached = _read_disk().get(key)
    if isinstance(cached, dict) and cached.get("name") in candidates:
        _memory[key] = cached
        return cached["name"]
    times = {name: measure(name, fn) for name, fn in candidates.items()}
    best = min(times, key=times.__getitem__)
    entry = {"name": best, "us": {n: round(t * 1e6, 1) for n, t in times.items()}}
    _memory[key] = entry
    _read_disk()[key] = entry
    _write_disk(key, entry)
    return best


def remembered() -> dict[str, dict]:
    """This process's choices so far (key -> {"name", "us"}), for ``shortrun info``."""
    return dict(_memory)


def forget() -> None:
    """Drop the in-memory choices and the cached file contents (tests; a changed cache dir)."""
    global _disk
    MEMO.clear()
    _memory.clear()
    _disk = None
