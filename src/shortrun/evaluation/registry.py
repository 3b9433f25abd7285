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
    "ebm": "shortrun.evaluation.density:SPEC",
    "dsm": "shortrun.evaluation.density:SPEC",
    "ssm": "shortrun.evaluation.density:SPEC",
    "sm": "shortrun.evaluation.density:SPEC",
    "rbm": "shortrun.evaluation.rbm:SPEC",
    "grbm": "shortrun.evaluation.rbm:SPEC",
    "classifier": "shortrun.evaluation.classifier:SPEC",
    "dual_mcmc": "shortrun.evaluation.dual_mcmc:SPEC",
    "lebm": "shortrun.evaluation.lebm:SPEC",
    "lebm_text": "shortrun.evaluation.text:LEBM_TEXT",
    "lstm_lm": "shortrun.evaluation.text:LSTM_LM",
    "jem": "shortrun.evaluation.jem:SPEC",
}


def eval_spec(model_name: str) -> EvalSpec:
    if model_name not in EVALUATORS:
        raise ConfigError(f"model {model_name!r} defines no evaluation metrics")
    module, attr = EVALUATORS[model_name].split(":")
    return getattr(importlib.import_module(module), attr)


def available_metrics(model_name: str) -> tuple[str, ...]:
    """The names ``shortrun eval --metrics`` accepts for ``model_name``."""
    return eval_spec(model_name).metrics


def choose_metrics(model_name: str, cfg: Any, info: Any, requested: list[str]) -> list[str]:
    """The metrics to compute: ``requested``, else the model's defaults for this data;
    unknown names (or names that do not fit the data) are a one-line ConfigError."""
    spec = eval_spec(model_name)
    if spec.choose is not None:
        return spec.choose(cfg, info, list(requested), model_name)
    return check_names(model_name, spec, list(requested))
