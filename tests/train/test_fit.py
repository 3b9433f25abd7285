"""The Python path to training: make_config equals a YAML recipe, fit() on a user's tensor,
a prebuilt model in the Trainer equals the recipe-built one, per-network learning rates."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from torch import nn

from shortrun.data.registry import load_data
from shortrun.errors import ConfigError
from shortrun.models.base import OptimOptions
from shortrun.models.ebm import EBM
from shortrun.models.registry import build_model
from shortrun.train.config import make_config, resolve
from shortrun.train.fit import fit
from shortrun.train.trainer import Trainer

QUIET = {"progress": False, "log_every": 1, "sample_every": 1000, "ckpt_every": 1000}


class Quadratic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * (self.scale * x * x).sum(-1)


def test_make_config_equals_the_same_recipe_in_yaml(tmp_path):
    sections = {"data": {"name": "digits", "binarize": True},
                "model": {"name": "rbm", "n_hidden": 16, "learning": "cd"},
                "train": {"steps": 10, "batch_size": 20, "lr": 0.05},
                "sample": {"n": 8}, "eval": {"n_samples": 100}}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"description": "d", **sections}))
    from_yaml = resolve(str(path))
    from_python = make_config(**sections, recipe="mine", description="d")
    assert from_python.to_dict() == from_yaml.to_dict()


def test_make_config_checks_keys_like_a_recipe():
    with pytest.raises(ConfigError, match=r"unknown key 'train.lrr'. Did you mean train.lr\?"):
        make_config(model={"name": "ebm"}, data={"name": "8gaussians"},
                    train={"steps": 1, "lrr": 1.0})


def test_fit_trains_a_user_energy_on_a_tensor_and_records_it(tmp_path):
    x = torch.randn(64, 2)
    model = EBM(Quadratic(), langevin_steps=2, buffer_size=64)
    assert model.info is None
    out = fit(model, x, steps=2, batch_size=16, run_dir=tmp_path / "run", **QUIET)
    assert out is model and model.info.shape == (2,) and model.info.kind == "vector"
    state = torch.load(tmp_path / "run" / "checkpoints" / "last.pt", weights_only=True)
    # the tensor is the run's own data: saved beside the checkpoint, named in config.yaml
    assert state["user_networks"] == ["energy"] and state["config"]["data"]["name"] == "npz"
    saved = np.load(tmp_path / "run" / "data.npz")
    torch.testing.assert_close(torch.from_numpy(saved["x_train"]), x)
    assert model.sample(5).shape == (5, 2)


def test_a_fit_run_is_evaluated_and_sampled_by_the_cli_on_its_own_data(tmp_path, capsys):
    """A model built from sizes alone (no user networks): `shortrun eval` / `sample` and
    `shortrun.load` read the run back, with the data fit() was given."""
    from shortrun.cli import main
    from shortrun.models.rbm import BernoulliRBM
    from shortrun.run import load

    x = (torch.rand(60, 6) > 0.5).float()
    run_dir = tmp_path / "run"
    fit(BernoulliRBM(n_hidden=3, learning="cd"), x, steps=2, batch_size=20, run_dir=run_dir,
        **QUIET)
    assert main(["eval", str(run_dir), "--metrics", "loglik"]) == 0
    assert "loglik_train" in capsys.readouterr().out
    assert main(["sample", str(run_dir), "--n", "4", "--out", str(tmp_path / "s.npz")]) == 0
    assert np.load(tmp_path / "s.npz")["x"].shape == (4, 6)
    assert load(run_dir).sample(2, steps=2).shape == (2, 6)


@pytest.mark.parametrize("kwargs, message", [
    ({}, r"shortrun.fit: give steps= or epochs="),
    ({"steps": 1, "grad_clipp": 1.0}, r"unknown key 'train.grad_clipp'"),
    ({"steps": 0}, r"train.steps: must be > 0; got 0"),
])
def test_fit_checks_train_options_with_the_yaml_messages(tmp_path, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        fit(EBM(Quadratic()), torch.randn(32, 2), run_dir=tmp_path / "r", **kwargs)


def test_keyword_options_are_checked_like_recipe_keys():
    with pytest.raises(ConfigError, match=r"model.step_size: must be > 0; got -1"):
        EBM(Quadratic(), step_size=-1)
    with pytest.raises(ConfigError, match=r"unknown key 'model.stepsize'"):
        EBM(Quadratic(), stepsize=0.1)


def test_a_prebuilt_model_is_trained_in_place_and_reproducibly(tmp_path):
    """The Trainer seeds training from train.seed after taking the model, so the same prebuilt
    weights give the same run."""
    cfg = resolve("rbm_digits", ["train.steps=3", "train.batch_size=20", "train.progress=false",
                                 "train.sample_every=1000"])
    data = load_data(cfg.data)
    states = []
    for name in ("a", "b"):
        torch.manual_seed(5)
        prebuilt = build_model(cfg, data.info)
        trainer = Trainer(cfg, tmp_path / name, data=data, model=prebuilt)
        before = prebuilt.W.detach().clone()
        trainer.fit()
        assert trainer.model is prebuilt and not torch.equal(before, prebuilt.W)
        states.append(prebuilt.state_dict())
    for k in states[0]:
        assert torch.equal(states[0][k], states[1][k]), k


def test_lebm_generator_lr_defaults_to_train_lr_and_prior_keeps_the_papers():
    from shortrun.data.base import DataInfo

    info = DataInfo((1, 28, 28), "image", -1.0, 1.0)
    small = ["model.nz=4", "model.ngf=2", "model.ndf=4"]
    optim = OptimOptions(lr=3e-4)
    m = build_model(resolve("lebm_mnist", small), info)
    opts = m.build_optimizers(optim)
    assert opts["generator"].param_groups[0]["lr"] == 3e-4
    assert opts["prior"].param_groups[0]["lr"] == 5e-5  # the recipe sets model.lr_prior
    m = build_model(resolve("lebm_mnist", [*small, "model.lr_generator=1e-2"]), info)
    from shortrun.models.lebm import LEBMOptions

    assert LEBMOptions().lr_prior == 2e-5
    assert m.build_optimizers(optim)["generator"].param_groups[0]["lr"] == 1e-2
