"""How a run chooses its routes (``train.routes``), and what it records of them: ``auto``
(raced or by size rule: :mod:`shortrun.speed.engine`), ``fixed`` (no timing; every family on
its fixed route) or a run's ``provenance.json`` / run directory (replay its recorded routes,
a key it lacks chosen as under ``auto``). ``SHORTRUN_ROUTE`` / ``SHORTRUN_ROUTE_<FAMILY>``
still pin a family whatever the policy. Why: docs/architecture.md, "A run says how it was
computed".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shortrun.errors import ConfigError

MODES = ("auto", "fixed")
PROVENANCE = "provenance.json"
_state: dict[str, Any] = {"mode": "auto", "recorded": {}}


def mode() -> str:
    """``auto``, ``fixed`` or ``replay``."""
    return _state["mode"]


def recorded(key: str) -> str | None:
    """The route a replayed run used for ``key`` (None: not replaying, or not recorded)."""
    return _state["recorded"].get(key)


def use(value: str) -> bool:
    """Set this process's policy from a ``train.routes`` value (a bad one: a
    :class:`ConfigError` naming the fix); whether the routes settled so far may not be the
    policy's (then the caller calls :func:`shortrun.speed.engine.forget`)."""
    before = _state["mode"]
    if value in MODES:
        _state.update(mode=value, recorded={})
    else:
        _state.update(mode="replay", recorded=read_recorded(value))
    return _state["mode"] != "auto" or before != "auto"


def read_recorded(value: str) -> dict[str, str]:
    """The routes recorded in a provenance file (or a run directory's): the last entry that
    has them."""
    path = Path(value)
    if path.is_dir():
        path = path / PROVENANCE
    fix = ("set train.routes to auto, fixed, or a run's provenance.json (or run directory) "
           "to replay its routes")
    if not path.is_file():
        raise ConfigError(f"train.routes={value}: not auto or fixed, and no such file; {fix}")
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"train.routes={value}: unreadable ({exc}); {fix}") from None
    entries = entries if isinstance(entries, list) else [entries]
    for entry in reversed(entries):
        routes = entry.get("routes") if isinstance(entry, dict) else None
        if isinstance(routes, dict) and isinstance(routes.get("chosen"), dict):
            return {str(k): str(v) for k, v in routes["chosen"].items()}
    raise ConfigError(f"train.routes={value}: the file records no routes (a run writes them "
                      f"when its training ends); {fix}")
