"""Model names → classes, imported lazily so the CLI starts fast.

:data:`MODELS` is the one place a model's name is written. Everything else that needs the
name derives it from here: the class attribute ``Model.name`` (:class:`RegisteredName`, a
reverse look-up by the class's import path), the ``model.name`` of options built from
Python (:meth:`Model.__init__ <shortrun.models.base.Model>` fills it from the class), the
``model_name`` a checkpoint records (the config's ``model.name``) and the evaluation registry
(:mod:`shortrun.evaluation.registry`, keyed by class). Registering a model is one line here.
"""

from __future__ import annotations

import difflib
import importlib
from typing import TYPE_CHECKING, Any

from shortrun.errors import ConfigError

if TYPE_CHECKING:  # (not models.base: it reads Model.name from here)
    from shortrun.data.base import DataInfo

#: name -> "module:Class". Names are a contract (recipes, run configs, checkpoints).
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


def class_path(cls: type) -> str:
    """``"module:Class"``, the form :data:`MODELS` (and the evaluation registry) use."""
    return f"{cls.__module__}:{cls.__qualname__}"


def registered_name(cls: type) -> str:
    """The name :data:`MODELS` gives ``cls``, else its nearest registered base's; ``""`` for a
    class none of whose bases is registered (e.g. the base ``Model``)."""
    by_path = {path: name for name, path in MODELS.items()}
    for klass in cls.__mro__:
        name = by_path.get(class_path(klass))
        if name is not None:
            return name
    return ""


def registered_name_of_options(options_cls: type) -> str:
    """The name of the registered model whose ``Config`` is ``options_cls`` (``""`` if none);
    imports the registered modules in turn, so it is for the rare Python path only
    (``make_config(model=EBMOptions(...))``)."""
    for name in MODELS:
        if model_class(name).Config is options_cls:
            return name
    return ""


class RegisteredName:
    """``Model.name``: on a class, the name :data:`MODELS` gives it; on a model, its options'
    ``name`` (the ``model.name`` its checkpoints record), else its class's. A subclass may
    still set ``name = "..."`` itself."""

    def __get__(self, obj: Any, owner: type) -> str:
        chosen = getattr(obj.__dict__.get("options"), "name", "") if obj is not None else ""
        return chosen or registered_name(owner)


def model_class(name: str) -> type:
    """The :class:`~shortrun.models.base.Model` subclass registered as ``name``."""
    if name not in MODELS:
        close = difflib.get_close_matches(name, list(MODELS), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"model.name: unknown model {name!r}.{hint} "
                          f"Known: {', '.join(sorted(MODELS))}")
    module, cls = MODELS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def build_model(cfg: Any, info: DataInfo) -> Any:
    """The recipe path: networks built from ``cfg.model``'s names, ``sample.steps`` set."""
    model = model_class(cfg.model.name).from_config(cfg.model, info)
    model.sample_steps = cfg.sample.steps
    return model
