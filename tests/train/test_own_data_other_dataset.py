"""A registered dataset handed to the Trainer under a recipe that names *another* registered
dataset is the run's own data (train/own_data.py): the run records it, and its pictures and
``shortrun eval`` use it, never the dataset the recipe names. The case here: the recipe says
``8gaussians``, the data handed in is ``load_data`` of the ``moons`` (stamped ``moons``)."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from shortrun.cli import main
from shortrun.data.base import LoadedData
from shortrun.data.registry import load_data
from shortrun.estimators import grid
from shortrun.evaluation import density as density_eval
from shortrun.metrics.mmd import mmd2
from shortrun.run import load_run
from shortrun.train.config import resolve
from shortrun.train.rundir import read_config
from shortrun.train.trainer import Trainer

TINY = ["train.steps=4", "train.batch_size=64", "train.log_every=2", "train.sample_every=4",
        "train.ckpt_every=4", "train.progress=false", "model.buffer_size=128",
        "model.langevin_steps=2", "model.hidden=8", "sample.n=32", "sample.steps=2",
        "eval.n_samples=200", "eval.batch_size=500", "data.n_train=600", "data.n_test=200"]


@pytest.fixture(scope="module")
def moons_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("moons") / "run"
    moons = load_data(resolve("ebm_moons", TINY).data)
    assert moons.extras["dataset"] == "moons"
    drawn: list[torch.Tensor] = []
    real = grid.save_density_and_samples

    def spy(energy, samples, data_train, *args, **kwargs):
        drawn.append(data_train.clone())
        return real(energy, samples, data_train, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grid, "save_density_and_samples", spy)
        trainer = Trainer(resolve("ebm_8gaussians", TINY), run_dir, data=moons)
        trainer.fit()
        trainer.close()
    return run_dir, moons, drawn


def test_the_run_records_the_moons_it_trained_on(moons_run):
    run_dir, moons, drawn = moons_run
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())["data"]
    assert saved["name"] == "npz"
    back = load_data(read_config(run_dir).data)
    assert torch.equal(back.train, moons.train) and torch.equal(back.test, moons.test)
    # the training picture is drawn over the moons
    assert drawn and all(torch.equal(d, moons.train) for d in drawn)


def test_eval_scores_and_draws_against_the_moons_not_the_eight_gaussians(moons_run, capsys,
                                                                        monkeypatch):
    run_dir, moons, _ = moons_run
    drawn: list[torch.Tensor] = []
    real = grid.save_density_and_samples

    def spy(energy, samples, data_train, *args, **kwargs):
        drawn.append(data_train.clone())
        return real(energy, samples, data_train, *args, **kwargs)

    monkeypatch.setattr(density_eval, "save_density_and_samples", spy)  # RUN_DIR/density.png
    assert main(["eval", str(run_dir), "--metrics", "mmd"]) == 0
    capsys.readouterr()
    result = json.loads((run_dir / "eval.json").read_text())
    run = load_run(run_dir)
    n = run.cfg.eval.n_samples
    torch.manual_seed(run.cfg.eval.seed)  # the draw `shortrun eval` makes (one chunk)
    samples = run.model.sample(n).detach().cpu()
    assert result["mmd"] == pytest.approx(mmd2(samples, moons.test[:n]), rel=1e-6)
    gaussians = load_data(resolve("ebm_8gaussians", TINY).data).test[:n]
    assert result["mmd"] != pytest.approx(mmd2(samples, gaussians), rel=1e-3)
    assert drawn and all(torch.equal(d, moons.train) for d in drawn)  # density.png too


def test_data_stamped_by_hand_with_another_name_is_the_runs_own_data(tmp_path):
    """A stamp without the options it was drawn with (set by hand, or by an older shortrun):
    the name alone tells it is not what the recipe names."""
    moons = load_data(resolve("ebm_moons", TINY).data)
    stamped = LoadedData(train=moons.train, test=moons.test, info=moons.info,
                         extras={"dataset": "moons"})
    trainer = Trainer(resolve("ebm_8gaussians", TINY), tmp_path / "run", data=stamped)
    trainer.close()
    assert trainer.cfg.data.name == "npz"
    assert torch.equal(load_data(read_config(tmp_path / "run").data).train, moons.train)


def test_the_named_dataset_drawn_with_other_options_is_the_runs_own_data(tmp_path):
    """``load_data`` of the recipe's own dataset name, but drawn with other options (another
    seed of the synthetic draw): the run keeps what it trained on, since re-loading what the
    config names would give other points."""
    cfg = resolve("ebm_8gaussians", TINY)
    other = load_data(resolve("ebm_8gaussians", [*TINY, "data.seed=99"]).data)
    assert not torch.equal(other.train, load_data(cfg.data).train)
    trainer = Trainer(cfg, tmp_path / "run", data=other)
    trainer.close()
    assert trainer.cfg.data.name == "npz"
    assert torch.equal(load_data(read_config(tmp_path / "run").data).train, other.train)


def test_the_named_dataset_read_from_another_folder_keeps_its_name(tmp_path):
    """Only where the files were read from differs: the same dataset, not copied."""
    cfg = resolve("ebm_8gaussians", TINY)
    same = load_data(resolve("ebm_8gaussians", [*TINY, f"data.data_dir={tmp_path}"]).data)
    trainer = Trainer(cfg, tmp_path / "run", data=same)
    trainer.close()
    assert trainer.cfg.data.name == "8gaussians"
    assert not (tmp_path / "run" / "data.npz").exists()
