"""Model names → classes, imported lazily so the CLI starts fast."""

from __future__ import annotations

import difflib
import importlib
from typing import TYPE_CHECKING, Any

from shortrun.errors import ConfigError

if TYPE_CHECKING:
    from shortrun.data.base import DataInfo
    from shortrun.models.base import Model

MODELS: dict[str, str] = {
    "ebm": "shortrun.models.ebm:EBM",
    "dsm": "shortrun.models.score:DSM",
    "ssm": "shortrun.models.score:SSM",
    "sm": "shortrun.models.score:SM",
    "rbm": "shortrun.models.rbm:BernoulliRBM",
    "grbm": "shortrun.models.grbm:GaussianBernoulliRBM",
    "classifier": "shortrun.models.classifier:Classifier",
    "dual_mcmc": "shortrun.models.dual_mcmc:DualMCMC",
    "lebm": "shortrun.models.lebm:LEBM",
    "lebm_text": "shortrun.models.lebm_text:LEBMText",
    "lstm_lm": "shortrun.models.lstm_lm:LstmLM",
    "nce": "shortrun.models.chain_free:NCE",
    "ed": "shortrun.models.chain_free:ED",
    "ed_rbm": "shortrun.models.ed_rbm:EDRBM",
    "ed_lebm": "shortrun.models.ed_lebm:EDLEBM",
    "jem": "shortrun.models.jem:JEM",
}


def model_class(name: str) -> type[Model]:
    if name not in MODELS:
        close = difflib.get_close_matches(name, list(MODELS), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"model.name: unknown model {name!r}.{hint} "
                          f"Known: {', '.join(sorted(MODELS))}")
    module, cls = MODELS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def build_model(cfg: Any, info: DataInfo) -> Model:
    """The recipe path: networks built from ``cfg.model``'s names, ``sample.steps`` set."""
    model = model_class(cfg.model.name).from_config(cfg.model, info)
    model.sample_steps = cfg.sample.steps
    return model
