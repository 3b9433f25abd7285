"""Every model type under torchrun (gloo, CPU, 2 processes), then resumed in 1 process.

One torchrun launch trains a tiny run of each model type (``dist_helper.torchrun_many``; the
``ebm`` type is covered by ``test_distributed.py``). Each test then checks its run: the
parameters are bit-identical on both ranks at the end, the checkpoint holds one shard per
rank, and a single process resumes it to a later step. The recipes of ``lebm``, ``dual_mcmc``,
``lebm_text`` and ``lstm_lm`` need MNIST / PTB under $SHORTRUN_DATA and are skipped without it;
``classifier`` trains its MNIST recipe on the bundled 8×8 digits instead.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import yaml
from dist_helper import torchrun_many, train_argv

from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.config import load_recipe
from shortrun.train.rundir import read_config
from shortrun.train.trainer import Trainer

STEPS = 6
COMMON = [f"train.steps={STEPS}", "train.log_every=3", "train.ckpt_every=3",
          "train.sample_every=1000", "sample.n=8", "sample.steps=3"]
TOY = ["data.n_train=512", "data.n_test=64", "train.batch_size=32", "model.hidden=16",
       "model.depth=2", "model.langevin_steps=3"]
MNIST = ["data.n_train=256", "train.batch_size=16", "train.threads=1"]
PTB = ["data.n_train=256", "data.max_words=12", "train.batch_size=8", "train.threads=1",
       "model.emb=8", "model.hidden=16"]


@dataclass(frozen=True)
class Case:
    recipe: str
    sets: list[str] = field(default_factory=list)
    needs_data: bool = False


CASES = {
    "dsm": Case("dsm_8gaussians", TOY),
    "ssm": Case("ssm_8gaussians", TOY),
    "sm": Case("dsm_8gaussians", [*TOY, "model.name=sm"]),
    # centred PCD: offsets and bias shifts written outside the optimiser, persistent chains
    "rbm": Case("rbm_digits", ["model.n_hidden=8", "model.n_chains=32"]),
    "grbm": Case("grbm_digits", ["model.n_hidden=8", "model.n_chains=32"]),
    "classifier": Case("classifier_digits", ["train.batch_size=32", "model.width=4",
                                             "model.feature_dim=8"]),
    "lebm": Case("lebm_mnist", [*MNIST, "model.nz=4", "model.ngf=4", "model.ndf=16",
                                "model.prior_steps=2", "model.post_steps=2"], True),
    "dual_mcmc": Case("dual_mcmc_mnist", [*MNIST, "model.nz=4", "model.ebm_channels=4",
                                          "model.gen_channels=8", "model.inf_channels=4",
                                          "model.x_steps=2", "model.z_steps=2"], True),
    # grad_clip (from the recipe) clips the rank-averaged gradient
    "lebm_text": Case("lebm_ptb_small", [*PTB, "model.nz=4", "model.ndf=16",
                                         "model.prior_steps=2", "model.post_steps=2"], True),
    "lstm_lm": Case("lstm_lm_ptb", PTB, True),
}


def has_data() -> bool:
    path = os.environ.get("SHORTRUN_DATA")
    return bool(path) and Path(path).is_dir()


def classifier_digits_recipe(folder: Path) -> str:
    """The classifier_mnist recipe with its data section pointed at the bundled digits."""
    _, raw = load_recipe("classifier_mnist")
    raw["data"] = {"name": "digits"}
    path = folder / "classifier_digits.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


@pytest.fixture(scope="module")
def two_process_runs(request, tmp_path_factory):
    """One torchrun launch for the cases this session selected: ``{name: (run_dir, error)}``."""
    selected = {item.callspec.params["name"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")}
    names = [n for n in CASES if n in selected and (has_data() or not CASES[n].needs_data)]
    root = tmp_path_factory.mktemp("two_process")
    runs = {}
    for name in names:
        case = CASES[name]
        recipe = (classifier_digits_recipe(root) if case.recipe == "classifier_digits"
                  else case.recipe)
        runs[name] = train_argv(root / name, recipe, [*COMMON, *case.sets])
    if not runs:
        return {}
    results, stderr = torchrun_many(root / "launch", runs)
    return {n: (root / n, err if err is None else f"{err}\n--- stderr:\n{stderr[-3000:]}")
            for n, err in results.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_two_processes_then_one_process_resume(name, two_process_runs, request):
    if CASES[name].needs_data:
        request.getfixturevalue("data_dir")  # skips without $SHORTRUN_DATA
    run, error = two_process_runs[name]
    assert error is None, error
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["world_size"] == 2
    assert rows[-1]["params_identical_across_ranks"] == 1.0, f"{name}: ranks drifted apart"
    model_name = read_config(run).model.name
    state = load_checkpoint(run / "checkpoints" / "last.pt", model_name)
    assert state["step"] == STEPS and state["world_size"] == 2 and len(state["shards"]) == 2
    if name == "rbm":
        shards = [s["buffers"] for s in state["shards"]]
        chains = [s["source.chains"] for s in shards]  # the RBM's chain source
        assert not torch.equal(*chains), "distinct chains"
        for key in ("mu", "lam"):  # centring offsets follow the global batch on every rank
            assert torch.equal(shards[0][key], shards[1][key]), key
    result = Trainer(read_config(run, [f"train.steps={STEPS + 2}"]), run, resume=True).fit()
    assert result.step == STEPS + 2
