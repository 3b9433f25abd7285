"""``train.routes: auto | fixed | <recorded file>`` (issue 42): a run records the routes and the
thread count it used in ``RUN_DIR/provenance.json``; ``fixed`` times nothing and computes what
the behaviour fingerprints record; a recorded file replays a run's routes bit for bit."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
import torch
from tests.behaviour.fingerprint import (
    RECORD,
    fingerprint_state,
    machine_key,
    tiny_data,
    tiny_overrides,
)

from shortrun.errors import ConfigError
from shortrun.speed import engine as routes
from shortrun.speed import policy as route_policy
from shortrun.train.config import resolve
from shortrun.train.trainer import Trainer


@pytest.fixture(autouse=True)
def _unpinned(monkeypatch):
    """No environment pin: the policy alone decides; back to ``auto`` afterwards."""
    for name in [k for k in os.environ if k.startswith("SHORTRUN_ROUTE")]:
        monkeypatch.delenv(name)
    routes.forget()
    yield
    route_policy.use("auto")
    routes.forget()


def test_fixed_pins_every_family_to_its_fixed_route_and_auto_pins_none():
    route_policy.use("fixed")
    assert all(routes.pinned_route(f) == routes.FIXED for f in routes.FAMILIES)
    route_policy.use("auto")
    assert all(routes.pinned_route(f) is None for f in routes.FAMILIES)


def test_an_environment_pin_still_wins_over_the_policy(monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE_RBM_STEP", "numpy")
    route_policy.use("fixed")
    assert routes.pinned_route("rbm_step") == "numpy"
    assert routes.pinned_route("conv") == routes.FIXED


@pytest.mark.parametrize("value, says", [
    ("fast", "not auto or fixed, and no such file"),
    ("{tmp}/empty.json", "records no routes"),
    ("{tmp}/bad.json", "unreadable"),
])
def test_a_bad_value_names_the_key_and_the_fix(tmp_path, value, says):
    (tmp_path / "empty.json").write_text(json.dumps([{"event": "start"}]))
    (tmp_path / "bad.json").write_text("[{")
    with pytest.raises(ConfigError, match=f"train.routes=.*{says}.*set train.routes to auto"):
        route_policy.use(value.format(tmp=tmp_path))


def test_a_recorded_route_is_taken_without_timing(tmp_path):
    record = [{"event": "start", "routes": {"policy": "auto", "threads": 1,
                                            "chosen": {"rbm|key": "numpy"}}}]
    (tmp_path / "provenance.json").write_text(json.dumps(record))
    assert route_policy.use(str(tmp_path)) and route_policy.mode() == "replay"

    def never() -> None:
        raise AssertionError("a replayed route was timed")

    assert routes.choose("rbm|key", {"torch": never, "numpy": never}) == "numpy"


def train(recipe: str, run_dir: Path, *extra: str) -> dict:
    cfg = resolve(recipe, [*tiny_overrides(recipe), *extra])
    trainer = Trainer(cfg, run_dir, data=tiny_data(cfg))
    trainer.fit()
    state = trainer.model.state_dict()
    trainer.close()
    return fingerprint_state(state)


def routes_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "provenance.json").read_text())[-1]["routes"]


def test_fixed_computes_the_recorded_fingerprint_without_any_pin(tmp_path, monkeypatch):
    """``rbm_digits`` exercises the whole-update family (``rbm_step``) and the RBM's
    products, plain ``torch.addmm`` whatever the policy."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    got = train("rbm_digits", tmp_path / "run", "train.routes=fixed")
    record = json.loads(RECORD.read_text())
    exact = {record["machine"]: record["recipes"]["rbm_digits"]["exact"],
             **{m: d["rbm_digits"] for m, d in record.get("exact_elsewhere", {}).items()
                if "rbm_digits" in d}}
    if machine_key() not in exact:
        pytest.skip(f"no exact fingerprint recorded for {machine_key()}")
    assert got["exact"] == exact[machine_key()]
    assert routes_of(tmp_path / "run") == {"policy": "fixed", "threads": 1, "chosen": {}}
    assert not (tmp_path / "cache").exists()  # nothing was timed, so nothing was cached


def test_a_run_replayed_from_its_provenance_computes_the_same_bits(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    torch.set_num_threads(1)
    first = train("rbm_digits", tmp_path / "a", "train.routes=auto")
    recorded = routes_of(tmp_path / "a")
    assert recorded["policy"] == "auto" and recorded["chosen"]
    routes.forget()
    with tempfile.TemporaryDirectory() as other:  # another cache: nothing to read back
        monkeypatch.setenv("XDG_CACHE_HOME", other)
        again = train("rbm_digits", tmp_path / "b", f"train.routes={tmp_path / 'a'}")
    assert again["exact"] == first["exact"]
    replayed = routes_of(tmp_path / "b")
    # the routes the step used are replayed (the record may hold more: a replay settles only
    # the keys it meets)
    assert replayed["policy"] == "replay" and replayed["chosen"]
    assert replayed["chosen"].items() <= recorded["chosen"].items()
