"""Model classes → their evaluation (:class:`~shortrun.evaluation.plan.EvalSpec`), imported
lazily.

The metric names ``eval --metrics`` accepts and each model's defaults live here, beside the code
that computes them; the models themselves know nothing about evaluation. The table is keyed by
model class, not by name (a name is written once, in :mod:`shortrun.models.registry`): a model
is evaluated by the entry of its class or of its nearest base that has one, so every name of a
family (``dsm``/``ssm``/``sm``, ``rbm``/``grbm``/``ed_rbm``) and a subclass of your own find
their evaluation without an entry of their own.
"""

from __future__ import annotations

import importlib
from typing import Any

from shortrun.errors import ConfigError
from shortrun.evaluation.plan import EvalSpec, check_names
from shortrun.models.registry import MODELS, class_path, model_class

#: "module:ModelClass" -> "module:EvalSpec"
EVALUATORS: dict[str, str] = {
    "shortrun.models.ebm:EBM": "shortrun.evaluation.likelihood:EBM",  # density's SPEC + loglik
    "shortrun.models.score:ScoreModel": "shortrun.evaluation.likelihood:EBM",
    "shortrun.models.rbm_learning:RBMBase": "shortrun.evaluation.rbm:SPEC",
    "shortrun.models.classifier:Classifier": "shortrun.evaluation.classifier:SPEC",
    # dual_mcmc's SPEC plus loglik
    "shortrun.models.dual_mcmc:DualMCMC": "shortrun.evaluation.likelihood:DUAL_MCMC",
    "shortrun.models.lebm:LEBM": "shortrun.evaluation.likelihood:LEBM",  # lebm's SPEC + loglik
    "shortrun.models.lebm_text:LEBMText": "shortrun.evaluation.text:LEBM_TEXT",
    "shortrun.models.lstm_lm:LstmLM": "shortrun.evaluation.text:LSTM_LM",
    "shortrun.models.chain_free:ChainFreeEBM": "shortrun.evaluation.likelihood:EBM",
    "shortrun.models.ed_lebm:EDLEBM": "shortrun.evaluation.likelihood:LEBM",
    "shortrun.models.jem:JEM": "shortrun.evaluation.jem:SPEC",
}


def eval_spec(model: Any) -> EvalSpec:
    """The evaluation of ``model``: a registered name, a model class or a model."""
    if isinstance(model, str):
        cls = model_class(model)
    else:
        cls = model if isinstance(model, type) else type(model)
    for klass in cls.__mro__:
        target = EVALUATORS.get(class_path(klass))
        if target is not None:
            module, attr = target.split(":")
            return getattr(importlib.import_module(module), attr)
    name = model if isinstance(model, str) else getattr(model, "name", "")
    if not isinstance(model, str) and isinstance(name, str) and name in MODELS:
        return eval_spec(name)  # a stand-in object that names a registered model
    raise ConfigError(f"model {name or cls.__name__!r} defines no evaluation metrics")


def choose_metrics(model: Any, cfg: Any, info: Any, requested: list[str]) -> list[str]:
    """The metrics to compute for ``model`` (a registered name, a model class or a model):
    ``requested``, else the model's defaults for this data; unknown names (or names that do
    not fit the data) are a one-line ConfigError."""
    spec = eval_spec(model)
    model_name = model if isinstance(model, str) else model.name
    if spec.choose is not None:
        return spec.choose(cfg, info, list(requested), model_name)
    return check_names(model_name, spec, list(requested))
