"""Data handed to the Trainer in Python is the run's data: saved in the run directory and used
by pictures and `shortrun eval`, never the registered dataset the recipe happened to name."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
import torch
import yaml

from shortrun.cli import main
from shortrun.data.array import array_data
from shortrun.data.base import DataInfo, LoadedData
from shortrun.data.registry import load_data
from shortrun.data.toy2d import toy_sample
from shortrun.errors import ConfigError, DataError
from shortrun.metrics.mmd import mmd2
from shortrun.run import load_run
from shortrun.train.config import resolve
from shortrun.train.rundir import read_config
from shortrun.train.trainer import Trainer

TINY = ["train.steps=6", "train.batch_size=64", "train.log_every=3", "train.sample_every=6",
        "train.ckpt_every=3", "train.progress=false", "model.buffer_size=128",
        "model.langevin_steps=3", "model.hidden=8", "sample.n=32", "sample.steps=3",
        "eval.n_samples=200", "eval.batch_size=500"]


def rings_data() -> LoadedData:
    """What the bug report handed in: ring-shaped 2-D points, no registered name."""
    g = torch.Generator().manual_seed(0)
    return LoadedData(train=toy_sample("rings", 1000, g), test=toy_sample("rings", 300, g),
                      info=DataInfo((2,), "vector"))


@pytest.fixture(scope="module")
def rings_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("rings")
    data = rings_data()
    cfg = resolve("ebm_8gaussians", TINY)  # the recipe says 8gaussians; the data is rings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = Trainer(cfg, tmp_path / "run", data=data)
    trainer.fit()
    trainer.close()
    return tmp_path / "run", data, [str(w.message) for w in caught]


def test_the_run_records_and_reloads_its_own_data(rings_run):
    run_dir, data, _ = rings_run
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())["data"]
    assert saved["name"] == "npz" and saved["path"] == str((run_dir / "data.npz").resolve())
    back = load_data(read_config(run_dir).data)
    assert torch.equal(back.train, data.train) and torch.equal(back.test, data.test)
    assert back.info == data.info and "density" not in back.extras


def test_eval_scores_against_the_rings_not_the_eight_gaussians(rings_run, capsys):
    run_dir, data, _ = rings_run
    assert main(["eval", str(run_dir), "--metrics", "mmd"]) == 0
    capsys.readouterr()
    result = json.loads((run_dir / "eval.json").read_text())
    run = load_run(run_dir)
    n = run.cfg.eval.n_samples
    torch.manual_seed(run.cfg.eval.seed)  # the draw `shortrun eval` makes (one chunk)
    samples = run.model.sample(n).detach().cpu()
    assert result["mmd"] == pytest.approx(mmd2(samples, data.test[:n]), rel=1e-6)
    gaussians = load_data(resolve("ebm_8gaussians", []).data).test[:n]
    assert result["mmd"] != pytest.approx(mmd2(samples, gaussians), rel=1e-3)


def test_the_closed_form_density_metric_is_dropped_and_said_so(rings_run, capsys):
    run_dir, _, messages = rings_run
    assert any("eval.metrics: kl_grid dropped" in m and "'8gaussians'" in m for m in messages)
    assert main(["eval", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "kl_grid" not in out and "loglik_grid" in out and "mmd" in out
    assert (run_dir / "density.png").is_file()


def test_a_moved_run_directory_finds_its_data(rings_run, tmp_path):
    run_dir, data, _ = rings_run
    moved = tmp_path / "elsewhere"
    shutil.copytree(run_dir, moved)
    (run_dir / "data.npz").rename(run_dir / "data.npz.away")  # the old place is gone
    try:
        assert torch.equal(load_data(read_config(moved).data).train, data.train)
    finally:
        (run_dir / "data.npz.away").rename(run_dir / "data.npz")


def test_the_registered_dataset_handed_in_keeps_its_name(tmp_path):
    cfg = resolve("ebm_8gaussians", [*TINY, "data.n_train=500", "data.n_test=100"])
    trainer = Trainer(cfg, tmp_path / "run", data=load_data(cfg.data))
    trainer.close()
    assert trainer.cfg.data.name == "8gaussians" and "kl_grid" in trainer.cfg.eval.metrics
    assert not (tmp_path / "run" / "data.npz").exists()


def test_a_binary_rbm_refuses_zero_to_sixteen_array_data(tmp_path):
    from sklearn.datasets import load_digits

    digits = array_data(load_digits().data.reshape(-1, 1, 8, 8))  # detected: image, 0-16
    cfg = resolve("rbm_digits", ["train.steps=1", "train.progress=false"])
    with pytest.raises(ConfigError, match=r"model rbm needs \{0,1\} data .* is 'image': set "
                                          r"data.binarize"):
        Trainer(cfg, tmp_path / "run", data=digits)


def test_a_binary_claim_on_zero_to_sixteen_data_is_refused(tmp_path):
    data = LoadedData(train=torch.randint(0, 17, (40, 1, 8, 8)).float(),
                      info=DataInfo((1, 8, 8), "binary", 0.0, 1.0))
    cfg = resolve("rbm_digits", ["train.steps=1", "train.progress=false"])
    with pytest.raises(DataError, match=r"info.kind is 'binary' but the values span \[0, 16\]"):
        Trainer(cfg, tmp_path / "run", data=data)


def test_npz_from_the_command_line_trains_and_evaluates(tmp_path, capsys):
    path = tmp_path / "mine.npz"
    g = torch.Generator().manual_seed(1)
    np.savez(path, x_train=toy_sample("moons", 600, g).numpy(),
             x_test=toy_sample("moons", 200, g).numpy())
    sets = [a for o in [*TINY, "data.name=npz", f"data.path={path}", "eval.metrics=[mmd]"]
            for a in ("--set", o)]
    assert main(["train", "ebm_8gaussians", "--out", str(tmp_path / "run"), *sets]) == 0
    assert main(["eval", str(tmp_path / "run")]) == 0
    assert "mmd" in json.loads((tmp_path / "run" / "eval.json").read_text())
    capsys.readouterr()
