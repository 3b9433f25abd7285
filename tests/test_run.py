"""shortrun.load: run directories and lone checkpoints, recipe-built and user-built models;
the top-level package stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

import shortrun
from shortrun.errors import ConfigError
from shortrun.run import load, load_run

QUIET = {"progress": False, "sample_every": 1000, "ckpt_every": 1000}


class Energy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x).squeeze(-1) + 0.5 * x.pow(2).sum(-1)


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("user") / "run"
    model = shortrun.EBM(Energy(), langevin_steps=2, buffer_size=32, sample_from="chains")
    shortrun.fit(model, torch.randn(64, 2), steps=2, batch_size=16, run_dir=run_dir, **QUIET)
    return run_dir, model


def test_a_recipe_run_loads_from_its_directory_or_its_lone_checkpoint(tmp_path):
    cfg = shortrun.make_config(model={"name": "rbm", "n_hidden": 8},
                               data={"name": "digits", "binarize": True},
                               train={"steps": 2, "batch_size": 20, **QUIET},
                               sample={"steps": 3})
    shortrun.Trainer(cfg, tmp_path / "run").fit()
    a = load(tmp_path / "run")
    b = load(tmp_path / "run" / "checkpoints" / "last.pt")
    assert not a.training and a.sample_steps == 3
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k
    assert a.sample(4).shape == (4, 1, 8, 8)


def test_a_user_network_run_needs_its_network_back_by_keyword(user_run):
    run_dir, trained = user_run
    with pytest.raises(ConfigError, match=r"your own energy network; pass it back: "
                                          r"shortrun.load\(path, energy=YourNetwork\(\)\)"):
        load(run_dir)
    with pytest.raises(ConfigError, match=r"EBM takes no network 'generator'; its networks are: "
                                          r"energy"):
        load(run_dir, energy=Energy(), generator=Energy())
    model = load(run_dir, energy=Energy())
    for k, v in trained.state_dict().items():
        assert torch.equal(v, model.state_dict()[k]), k
    with pytest.raises(ConfigError, match=r"built from your own networks \(energy\)"):
        load_run(run_dir)


def test_a_missing_path_is_one_line():
    with pytest.raises(ConfigError, match=r"shortrun.load: 'nowhere' does not exist"):
        load("nowhere")


def test_import_shortrun_is_light_and_exports_resolve_lazily():
    code = ("import sys, shortrun; assert 'torch' not in sys.modules, 'torch imported'; "
            "assert shortrun.BernoulliRBM.__name__ == 'BernoulliRBM'; "
            "assert callable(shortrun.fit) and callable(shortrun.load)")
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        shortrun.nope  # noqa: B018
