"""Who hands the LEBM generator its layout: ``shortrun.fit`` / ``shortrun train`` (the Trainer)
settles ``channels_last: auto`` once, before the first chain step, and records it in
``provenance.json``; loading a run (``shortrun.load``, the CLI's ``load_run``) settles it
again; ``train.routes: fixed`` gives NHWC without timing."""

from __future__ import annotations

import json

import pytest
import torch

import shortrun
from shortrun.models.lebm_nets import Generator, PriorTilt
from shortrun.speed import engine as routes
from shortrun.speed import policy

NZ = 4


@pytest.fixture
def nchw_wins(monkeypatch):
    """The conv family unpinned (its layers pinned), and a fake timer by which NCHW wins."""
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.delenv("SHORTRUN_ROUTE_CONV")
    monkeypatch.setenv("SHORTRUN_ROUTE_DECONV", "conv")
    timed: list[str] = []
    monkeypatch.setattr(routes, "measure",
                        lambda name, fn: (timed.append(name), 0.0 if name == "nchw" else 1.0)[1])
    yield timed
    policy.use("auto")  # train.routes sets the process's policy


def _lebm() -> tuple[shortrun.LEBM, list[str | None]]:
    """A Python user's LEBM over an ``auto`` generator, and the layout each forward saw."""
    torch.manual_seed(0)
    g = Generator("mnist28", NZ, 2, "auto")
    seen: list[str | None] = []
    g.register_forward_pre_hook(lambda m, args: seen.append(m.layout))
    model = shortrun.LEBM(g, PriorTilt(NZ, 8), nz=NZ, prior_steps=2, post_steps=2)
    return model, seen


def _x(n: int = 16) -> torch.Tensor:
    return torch.rand(n, 1, 28, 28, generator=torch.Generator().manual_seed(1)) * 2 - 1


def test_fit_settles_auto_before_the_first_chain_step_and_records_it(tmp_path, nchw_wins):
    model, seen = _lebm()
    shortrun.fit(model, _x(), steps=1, batch_size=8, run_dir=tmp_path / "run", progress=False,
                 threads=1)
    assert seen and set(seen) == {"nchw"}  # every forward, the first included, had its layout
    assert sorted(set(nchw_wins)) == ["nchw", "nhwc"]
    chosen = json.loads((tmp_path / "run" / "provenance.json").read_text())[-1]["routes"]
    assert chosen["chosen"]["conv|float32|threads=1|batch=8|mnist28-nz4-ngf2"] == "nchw"
    nchw_wins.clear()
    loaded = shortrun.load(tmp_path / "run", generator=Generator("mnist28", NZ, 2, "auto"),
                           prior=PriorTilt(NZ, 8))
    assert loaded.generator.layout == "nchw" and not nchw_wins  # this process's choice


def test_fixed_routes_give_nhwc_without_timing(tmp_path, nchw_wins):
    model, seen = _lebm()
    shortrun.fit(model, _x(), steps=1, batch_size=8, progress=False, threads=1, routes="fixed")
    assert set(seen) == {"nhwc"} and not nchw_wins


def test_a_loaded_recipe_run_is_handed_its_layout(tmp_path, data_dir, monkeypatch):
    from shortrun.cli import main
    from shortrun.run import load_run

    monkeypatch.setenv("SHORTRUN_ROUTE_CONV", "nchw")  # a pin: settled without timing
    sets = ["data.n_train=64", "train.steps=1", "train.batch_size=8", "train.progress=false",
            f"model.nz={NZ}", "model.ngf=2", "model.ndf=8", "model.prior_steps=2",
            "model.post_steps=2"]
    run = tmp_path / "run"
    assert main(["train", "lebm_mnist", *[a for kv in sets for a in ("--set", kv)], "--out",
                 str(run), "--data-dir", str(data_dir)]) == 0
    assert load_run(run).model.generator.layout == "nchw"
    assert shortrun.load(run).generator.layout == "nchw"
