"""The route cache: ``$XDG_CACHE_HOME/shortrun/routes.json`` (else ``~/.cache/...``). Per
machine (:func:`machine_key`), each race's choice (cache key -> ``{"name", "us", "races"}``)
among routes that passed the same float64 check: deleting or corrupting the file costs a
re-measurement, never correctness.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path

import torch

from shortrun.errors import ConfigError
from shortrun.hardware import cpu_machine

_disk: dict[str, dict] | None = None  # this machine's entries of the file, once read


def cache_path() -> Path:
    """``$XDG_CACHE_HOME/shortrun/routes.json``, else ``~/.cache/shortrun/routes.json``."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "shortrun" / "routes.json"


def machine_key() -> str:
    """What a cached choice is valid for beyond its own key: the CPU (model and vector units)
    and the torch build."""
    return f"{cpu_machine()} | torch {torch.__version__}"


def entries() -> dict[str, dict]:
    """This machine's entries (read once per process, then kept in memory)."""
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


def store(key: str, entry: dict) -> None:
    """Merge one choice into memory and the file (read, update, atomic replace); a read-only
    cache directory only means the choice is measured again in the next process."""
    entries()[key] = entry
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


def drop_machine() -> int:
    """Drop this machine's entries from the file (other machines' stay); how many it held."""
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


def forget() -> None:
    """Read the file afresh at the next use (tests; a changed cache directory)."""
    global _disk
    _disk = None
