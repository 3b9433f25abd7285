"""One name per model and its options class: ``X`` and ``XOptions`` (issue 42); the earlier
names stay importable as aliases of the same objects."""

from __future__ import annotations

import pytest

import shortrun
from shortrun.models.registry import MODELS, model_class


@pytest.mark.parametrize("name", sorted(MODELS))
def test_options_class_is_named_after_its_model(name):
    cls = model_class(name)
    wanted = {c.__name__ + "Options" for c in cls.__mro__}
    assert cls.Config.__name__ in wanted, (cls.__name__, cls.Config.__name__)


@pytest.mark.parametrize("old, new", [
    ("GaussianRBMOptions", "GaussianBernoulliRBMOptions"), ("LstmLmOptions", "LstmLMOptions"),
    ("ScoreOptions", "ScoreModelOptions"), ("DAMCChains", "DAMC"),
])
def test_earlier_names_are_aliases(old, new):
    assert getattr(shortrun, old) is getattr(shortrun, new)


def test_score_shorthands_are_the_one_score_model():
    for short, objective in (("DSM", "dsm"), ("SSM", "ssm"), ("SM", "sm")):
        cls = getattr(shortrun, short)
        assert issubclass(cls, shortrun.ScoreModel) and cls.name == objective


# --- one name a model: written once, in models/registry.py ----------------------------------
# each registered name's evaluation, pinned: the class-keyed registry must give exactly these
EVALUATION_OF = {
    "ebm": "likelihood:EBM", "dsm": "likelihood:EBM", "ssm": "likelihood:EBM",
    "sm": "likelihood:EBM", "rbm": "rbm:SPEC", "grbm": "rbm:SPEC", "ed_rbm": "rbm:SPEC",
    "classifier": "classifier:SPEC", "dual_mcmc": "likelihood:DUAL_MCMC",
    "lebm": "likelihood:LEBM", "lebm_text": "text:LEBM_TEXT", "lstm_lm": "text:LSTM_LM",
    "nce": "likelihood:EBM", "ed": "likelihood:EBM", "ed_lebm": "likelihood:LEBM",
    "jem": "jem:SPEC",
}


def spec_at(target: str):
    import importlib

    module, attr = target.split(":")
    return getattr(importlib.import_module(f"shortrun.evaluation.{module}"), attr)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_registered_name_is_its_class_name_and_keeps_its_evaluation(name):
    from shortrun.evaluation.registry import eval_spec

    assert model_class(name).name == name
    assert eval_spec(name) is spec_at(EVALUATION_OF[name])
    assert eval_spec(model_class(name)) is spec_at(EVALUATION_OF[name])


def test_models_built_in_python_carry_their_name_in_their_options():
    import torch

    from shortrun.models.score import ScoreModel

    energy = torch.nn.Linear(2, 1)
    for cls, name in ((shortrun.EBM, "ebm"), (shortrun.SSM, "ssm"), (shortrun.NCE, "nce")):
        model = cls(energy)
        assert model.name == model.options.name == name
    assert ScoreModel(energy).name == "dsm" and ScoreModel(energy, name="sm").name == "sm"
    assert shortrun.make_config(model=shortrun.BernoulliRBMOptions(n_hidden=4),
                                data={"name": "digits", "binarize": True},
                                train={"steps": 1}).model.name == "rbm"


class ToyEBM(shortrun.EBM):
    """A model registered by this test alone: one MODELS entry and nothing else."""


def test_a_model_registered_once_is_found_everywhere(monkeypatch, tmp_path, capsys):
    """Class attribute, options, config, checkpoint, `shortrun.load`, evaluation and the CLI
    all find ``toy_ebm`` from its one line in MODELS."""
    import json

    import torch

    from shortrun.cli import main
    from shortrun.evaluation.registry import eval_spec
    from shortrun.models.registry import class_path
    from shortrun.train.trainer import Trainer

    monkeypatch.setitem(MODELS, "toy_ebm", class_path(ToyEBM))
    assert model_class("toy_ebm") is ToyEBM and ToyEBM.name == "toy_ebm"
    assert eval_spec("toy_ebm") is eval_spec("ebm")
    cfg = shortrun.make_config(
        model={"name": "toy_ebm", "hidden": 8, "depth": 1, "langevin_steps": 2,
               "buffer_size": 64},
        data={"name": "8gaussians", "n_train": 64, "n_test": 32},
        train={"steps": 2, "batch_size": 32, "progress": False, "sample_every": 1000},
        sample={"n": 8})
    run_dir = tmp_path / "run"
    trainer = Trainer(cfg, run_dir)
    try:
        trainer.fit()
    finally:
        trainer.close()
    state = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert state["model_name"] == "toy_ebm"
    loaded = shortrun.load(run_dir)
    assert type(loaded) is ToyEBM and loaded.name == "toy_ebm"
    assert main(["sample", str(run_dir), "--n", "5", "--out", str(tmp_path / "s.npz")]) == 0
    assert main(["eval", str(run_dir), "--metrics", "mmd"]) == 0, capsys.readouterr().err
    assert "mmd" in json.loads((run_dir / "eval.json").read_text())
