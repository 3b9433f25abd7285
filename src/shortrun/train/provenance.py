"""``RUN_DIR/provenance.json``: which code, on which machine, by which command made a run.

One entry is written when a run starts and one more on each ``--resume``, so a run trained in
several sessions says what each session ran on. Each entry holds the shortrun version, the git
commit of the shortrun source when it is a git checkout (and whether that tree had
uncommitted changes), the torch and Python versions, the CPU model, the device and the
command line; when training ends, the routes the run used (``routes``: the policy of
``train.routes``, each chosen route by its cache key, and the thread count it trained on; see
:mod:`shortrun.speed.policy`). ``config.yaml`` stays the config alone: ``--resume`` and
``shortrun eval`` re-read it; shortrun reads this file back only when ``train.routes`` names it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from shortrun import hardware
from shortrun.version import __version__

PROVENANCE = "provenance.json"
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # src/shortrun


def _git(*args: str, cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_source(package_dir: Path = PACKAGE_DIR) -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` of the checkout holding ``package_dir``, or None.

    None when git is missing or the package is not inside a checkout of its own — an install
    in site-packages under some other project's repository must not report that project's
    commit, so the checkout counts only if the package lies at ``<root>/src/shortrun``.
    """
    root = _git("rev-parse", "--show-toplevel", cwd=package_dir)
    if not root or (Path(root) / "src" / "shortrun").resolve() != package_dir.resolve():
        return None
    commit = _git("rev-parse", "HEAD", cwd=package_dir)
    if not commit:
        return None
    # what a run executes: the package and its build file; untracked files in src count
    status = _git("status", "--porcelain", "--", "src", "pyproject.toml", cwd=Path(root))
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def provenance_entry(step: int, device: str = "cpu", resumed: bool = False) -> dict[str, Any]:
    """What this process is: code versions, machine and command line, at ``step``."""
    entry: dict[str, Any] = {
        "event": "resume" if resumed else "start",
        "step": step,
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "shortrun": __version__,
        "git": git_source(),
        "source": str(PACKAGE_DIR),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": hardware.cpu_model(),
        "cpu_signature": hardware.cpu_signature(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        entry["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return entry


def record_provenance(run_dir: Path, step: int, device: str = "cpu",
                      resumed: bool = False) -> Path:
    """Append this session's entry to ``RUN_DIR/provenance.json`` (a JSON list), atomically.

    An unreadable file (edited by hand, cut short) is kept beside as ``.unreadable`` and a new
    list is begun, with a warning: provenance must never stop a run from resuming.
    """
    path = Path(run_dir) / PROVENANCE
    entries: list[Any] = []
    if path.is_file():
        try:
            entries = json.loads(path.read_text())
            if not isinstance(entries, list):
                raise ValueError("not a list")
        except (ValueError, OSError) as exc:
            aside = path.with_name(PROVENANCE + ".unreadable")
            path.replace(aside)
            warnings.warn(f"{path} was unreadable ({exc}); kept as {aside.name}, starting a new "
                          "one", stacklevel=2)
            entries = []
    entries.append(provenance_entry(step, device, resumed))
    tmp = path.with_name(PROVENANCE + ".tmp")
    tmp.write_text(json.dumps(entries, indent=2) + "\n")
    tmp.replace(path)
    return path


def record_routes(run_dir: Path, policy: str, threads: int) -> None:
    """Add to this session's (the last) entry the routes it used and its thread count: what
    ``train.routes: RUN_DIR/provenance.json`` replays. Never stops a run: a missing or
    unreadable file is left as it is."""
    from shortrun.speed import engine as routes

    path = Path(run_dir) / PROVENANCE
    try:
        entries = json.loads(path.read_text())
        if not isinstance(entries, list) or not entries or not isinstance(entries[-1], dict):
            return
        entries[-1]["routes"] = {"policy": policy, "threads": threads,
                                 "chosen": {k: v["name"] for k, v in
                                            sorted(routes.remembered().items())}}
        tmp = path.with_name(PROVENANCE + ".tmp")
        tmp.write_text(json.dumps(entries, indent=2) + "\n")
        tmp.replace(path)
    except (OSError, ValueError):
        return
