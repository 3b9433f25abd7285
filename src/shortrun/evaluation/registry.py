"""Model names → their evaluation (:class:`~shortrun.evaluation.plan.EvalSpec`), imported lazily.

The metric names ``eval --metrics`` accepts and each model's defaults live here, beside the code
that computes them; the models themselves know nothing about evaluation.
"""

from __future__ import annotations

import importlib
from typing import Any

from shortrun.errors import ConfigError
from shortrun.evaluation.plan import EvalSpec, check_names

EVALUATORS: dict[str, str] = {
    "ebm": "shortrun.evaluation.likelihood:EBM",  # density's SPEC plus loglik
    "dsm": "shortrun.evaluation.likelihood:EBM",
    "ssm": "shortrun.evaluation.likelihood:EBM",
    "sm": "shortrun.evaluation.likelihood:EBM",
    "rbm": "shortrun.evaluation.rbm:SPEC",
    "grbm": "shortrun.evaluation.rbm:SPEC",
    "classifier": "shortrun.evaluation.classifier:SPEC",
    "dual_mcmc": "shortrun.evaluation.likelihood:DUAL_MCMC",  # dual_mcmc's SPEC plus loglik
    "lebm": "shortrun.evaluation.likelihood:LEBM",  # lebm's SPEC plus loglik
    "lebm_text": "shortrun.evaluation.text:LEBM_TEXT",
    "lstm_lm": "shortrun.evaluation.text:LSTM_LM",
    "nce": "shortrun.evaluation.likelihood:EBM",
    "ed": "shortrun.evaluation.likelihood:EBM",
    "ed_rbm": "shortrun.evaluation.rbm:SPEC",
    "ed_lebm": "shortrun.evaluation.likelihood:LEBM",  # lebm's SPEC plus loglik
    "jem": "shortrun.evaluation.jem:SPEC",
}


def eval_spec(model_name: str) -> EvalSpec:
    if model_name not in EVALUATORS:
        raise ConfigError(f"model {model_name!r} defines no evaluation metrics")
    module, attr = EVALUATORS[model_name].split(":")
    return getattr(importlib.import_module(module), attr)


def choose_metrics(model_name: str, cfg: Any, info: Any, requested: list[str]) -> list[str]:
    """The metrics to compute: ``requested``, else the model's defaults for this data;
    unknown names (or names that do not fit the data) are a one-line ConfigError."""
    spec = eval_spec(model_name)
    if spec.choose is not None:
        return spec.choose(cfg, info, list(requested), model_name)
    return check_names(model_name, spec, list(requested))
