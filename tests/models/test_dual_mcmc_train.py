"""Dual-MCMC through the Trainer and the command line: bit-identical resume, the recipes'
official values, and the eval.json keys the issue names."""

import json

import numpy as np
import pytest
import torch
import yaml

from shortrun.cli import main
from shortrun.data.base import DataInfo, LoadedData
from shortrun.data.registry import DATASETS
from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.config import build_config, recipes_dir, resolve
from shortrun.train.rundir import read_config
from shortrun.train.trainer import Trainer

TINY = ["model.nz=4", "model.ebm_channels=4", "model.gen_channels=8", "model.inf_channels=4",
        "model.x_steps=2", "model.z_steps=2", "train.batch_size=8", "train.log_every=2",
        "train.ckpt_every=2", "train.sample_every=1000", "train.progress=false", "sample.n=4"]


def synthetic_fashion() -> LoadedData:
    g = torch.Generator().manual_seed(0)
    info = DataInfo(shape=(1, 28, 28), kind="image", low=-1.0, high=1.0,
                    raw_scale=127.5, raw_offset=127.5)
    return LoadedData(train=torch.rand(32, 1, 28, 28, generator=g) * 2 - 1, info=info,
                      test=torch.rand(8, 1, 28, 28, generator=g) * 2 - 1)


def test_resume_is_bit_identical(tmp_path):
    """4 steps straight == 2 steps + resume + 2 steps, for all three networks, the spectral-norm
    vectors, the generator's BatchNorm statistics and the three optimisers."""
    data = synthetic_fashion()
    base = [*TINY, "model.spectral_norm=true", "data.n_train=32", "train.lr_decay=0.5"]
    Trainer(resolve("dual_mcmc_fashion", [*base, "train.steps=4"]), tmp_path / "a",
            data=data).fit()
    Trainer(resolve("dual_mcmc_fashion", [*base, "train.steps=2"]), tmp_path / "b",
            data=data).fit()
    Trainer(read_config(tmp_path / "b", ["train.steps=4"]), tmp_path / "b", resume=True,
            data=data).fit()
    a = load_checkpoint(tmp_path / "a" / "checkpoints" / "last.pt", "dual_mcmc")
    b = load_checkpoint(tmp_path / "b" / "checkpoints" / "last.pt", "dual_mcmc")
    assert a["model"].keys() == b["model"].keys()
    assert any("running_mean" in k for k in a["model"])
    assert any("_u" in k for k in a["model"])
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    assert set(a["optimizers"]) == {"generator", "inference", "ebm"}
    for name in a["optimizers"]:
        for pid, st in a["optimizers"][name]["state"].items():
            assert torch.equal(st["exp_avg"], b["optimizers"][name]["state"][pid]["exp_avg"])
    # 32 images / batch 8 = 4 steps per epoch: one lr_decay (0.5) applied by step 4
    assert b["optimizers"]["generator"]["param_groups"][0]["lr"] == pytest.approx(1e-3 * 0.5)
    assert (tmp_path / "a" / "samples" / "step_0000004_generator.png").is_file()


def test_recipes_carry_the_papers_values():
    want = {"nz": 128, "sigma": 0.3, "x_steps": 30, "x_noise": 0.001, "z_steps": 10,
            "z_step_size": 0.1, "z_noise": 0.1, "g_factor": 1.0, "i_factor": 0.1,
            "lr_ebm": 1e-4, "lr_generator": 3e-4, "lr_inference": 1e-4,
            "weight_decay_ebm": 0.0, "weight_decay_generator": 5e-4,
            "weight_decay_inference": 5e-4, "temperature": True, "spectral_norm": True}
    for name, data, s_x, s_factor in (("cifar10", "cifar10", 0.5, 50.0),
                                      ("celeba64", "celeba64", 0.3, 70.0)):
        raw = yaml.safe_load((recipes_dir() / f"dual_mcmc_{name}.yaml").read_text())
        assert raw["data"]["name"] == data
        model = raw["model"]
        assert {k: model[k] for k in want} == want, name
        assert (model["x_step_size"], model["s_factor"]) == (s_x, s_factor)
        t = raw["train"]
        assert (t["batch_size"], t["betas"], t["lr_decay"]) == (100, [0.0, 0.9], 0.998)
        assert t["energy_bound"] == 1.0e4  # the script stops when |E_data − E_neg| > 1e4
        if data in DATASETS:  # the loaders live in another module; the config must build
            cfg = build_config(raw, recipe=f"dual_mcmc_{name}")
            assert cfg.model.s_factor == s_factor
    for name in ("mnist", "fashion"):
        cfg = resolve(f"dual_mcmc_{name}")
        assert cfg.model.name == "dual_mcmc" and cfg.data.name == name


def test_train_sample_eval_from_the_command_line(tmp_path, data_dir, monkeypatch, capsys):
    """The CLI contract on real Fashion-MNIST (200 images): eval.json gets fd_generator,
    fd_revised, mse_inference and mse_chain. The FD extractor is a fixed pixel subset here;
    the real one is the Fashion classifier (bench/results_dual_mcmc.md)."""
    from shortrun.evaluation import features

    run = tmp_path / "run"
    sets = [a for s in [*TINY, "train.steps=2", "data.n_train=200", "eval.n_samples=24",
                        "eval.batch_size=12"] for a in ("--set", s)]
    assert main(["train", "dual_mcmc_fashion", "--out", str(run), "--data-dir", str(data_dir),
                 *sets]) == 0
    assert main(["sample", str(run), "--n", "6", "--out", str(tmp_path / "s.npz")]) == 0
    with np.load(tmp_path / "s.npz") as f:
        assert f["x"].shape == (6, 1, 28, 28)
        assert f["x"].min() >= 0 and f["x"].max() <= 255

    def pixels(spec, data_dir=None):
        info = DataInfo(shape=(1, 28, 28), kind="image", low=-1.0, high=1.0)
        return features.Extractor("pixels", lambda x: x.flatten(1)[:, ::49], 16, info)

    monkeypatch.setattr(features, "load_extractor", pixels)
    assert main(["eval", str(run), "--metrics", "mse,fd"]) == 0
    out = json.loads((run / "eval.json").read_text())
    for key in ("fd_generator", "fd_revised", "mse_inference", "mse_chain"):
        assert np.isfinite(out[key]) and out[key] >= 0, key
    assert out["fd_n"] == 24 and out["mse_n"] == 24 and out["step"] == 2
    assert "mse_chain" in capsys.readouterr().out
