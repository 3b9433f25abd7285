"""Whose route-cache entries a machine may use (shortrun.speed.cache): only its own, those filed
under its CPU model, its vector units and its torch build (``cache.machine_key``). A choice
cached by any other machine (another CPU model, the same model name with other vector units
— a virtual machine may report one name for CPUs with and without AVX-512 — or another torch)
is never used: the candidates are timed again. Writing this machine's choice keeps every other
machine's entries as they were.

The timer is a fake (each candidate's time is given), so which route wins, and whether any
timing happened, are known exactly."""

from __future__ import annotations

import json

import pytest
import torch

from shortrun import hardware
from shortrun.speed import cache
from shortrun.speed import engine as routes

KEY = "mlp|float32|threads=1|rows=128|2x128x128"
TIMES = {"torch": 3.0, "onednn": 2.0, "numpy": 1.0}  # by measurement, numpy wins


@pytest.fixture
def timed(monkeypatch):
    monkeypatch.delenv("SHORTRUN_ROUTE", raising=False)
    calls: list[str] = []

    def fake(name, fn):
        calls.append(name)
        fn()
        return TIMES[name]

    monkeypatch.setattr(routes, "measure", fake)
    routes.forget()
    return calls


def candidates() -> dict:
    return {name: (lambda: None) for name in TIMES}


def cached_elsewhere(machine: str, route: str = "torch") -> dict:
    """A cache file whose only choice for KEY was made on ``machine``."""
    return {machine: {KEY: {"name": route, "us": {route: 1.0}}}}


def write_cache(data: dict) -> None:
    path = cache.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    routes.forget()  # a new process reads the file afresh


def other_machines() -> dict[str, str]:
    model, version = hardware.cpu_model(), torch.__version__
    units = hardware.cpu_machine()[len(model):]
    return {
        "another CPU model": f"Some Other CPU 9000{units} | torch {version}",
        "other vector units": f"{model} [avx512f avx512_bf16 amx_tile] | torch {version}"
        if "avx512f" not in units else f"{model} [avx2 fma] | torch {version}",
        "the CPU model alone": f"{model} | torch {version}",
        "another torch": f"{hardware.cpu_machine()} | torch 0.0.1",
        "no torch build": hardware.cpu_machine(),
    }


def test_this_machines_own_entry_is_used_without_timing(timed):
    write_cache(cached_elsewhere(cache.machine_key()))
    assert routes.choose(KEY, candidates()) == "torch"
    assert timed == []


@pytest.mark.parametrize("which", list(other_machines()))
def test_another_machines_entry_is_never_used(timed, which):
    machine = other_machines()[which]
    assert machine != cache.machine_key()
    write_cache(cached_elsewhere(machine))
    assert routes.choose(KEY, candidates()) == "numpy"  # timed here, not taken from there
    assert sorted(timed) == sorted(list(TIMES) * routes.ROUNDS)
    data = json.loads(cache.cache_path().read_text())
    assert data[machine] == cached_elsewhere(machine)[machine]  # left as it was
    assert data[cache.machine_key()][KEY]["name"] == "numpy"


def test_a_machine_whose_vector_units_differ_times_again(timed, monkeypatch):
    """The same file, read by the same CPU model with other vector units (what a virtual
    machine may report for CPUs with and without AVX-512): its choices do not carry over."""
    assert routes.choose(KEY, candidates()) == "numpy"
    first = len(timed)
    routes.forget()
    assert routes.choose(KEY, candidates()) == "numpy" and len(timed) == first  # from the file
    flags = hardware.cpu_flags()
    other = (flags - {"avx512f"}) if "avx512f" in flags else (flags | {"avx512f"})
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset(other))
    monkeypatch.setitem(TIMES, "torch", 0.5)  # on this other machine torch is fastest
    routes.forget()
    assert routes.choose(KEY, candidates()) == "torch"
    assert len(timed) == 2 * first
    data = json.loads(cache.cache_path().read_text())
    assert len(data) == 2 and {e[KEY]["name"] for e in data.values()} == {"numpy", "torch"}


def test_a_new_torch_build_times_again(timed, monkeypatch):
    assert routes.choose(KEY, candidates()) == "numpy"
    first = len(timed)
    monkeypatch.setattr(torch, "__version__", "0.0.1+other")
    routes.forget()
    assert routes.choose(KEY, candidates()) == "numpy" and len(timed) == 2 * first
