"""shortrun: train, sample and evaluate energy-based models with MCMC.

Sign convention, stated once for the whole library: an energy maps a batch ``(B, *shape)``
to ``(B,)`` and ``p(x) ∝ exp(-E(x))`` — lower energy is more probable.

The Python API (``shortrun.fit``, ``shortrun.load``, the model classes, ...) is imported on
first use, so ``import shortrun`` stays light. See docs/python.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from shortrun.errors import ConfigError, ShortrunError
from shortrun.version import __version__

#: public name -> "module:attribute", resolved on first access (PEP 562)
_LAZY: dict[str, str] = {
    "fit": "shortrun.train.fit:fit",
    "load": "shortrun.run:load",
    "make_config": "shortrun.train.config:make_config",
    "Trainer": "shortrun.train.trainer:Trainer",
    "DataInfo": "shortrun.data.base:DataInfo",
    "infer_info": "shortrun.data.array:infer_info",
    "array_data": "shortrun.data.array:array_data",
    "OptimOptions": "shortrun.models.base:OptimOptions",
    "Model": "shortrun.models.base:Model",
    "EBM": "shortrun.models.ebm:EBM",
    "EBMOptions": "shortrun.models.ebm:EBMOptions",
    "DSM": "shortrun.models.score:DSM",
    "SSM": "shortrun.models.score:SSM",
    "SM": "shortrun.models.score:SM",
    "ScoreModel": "shortrun.models.score:ScoreModel",
    "ScoreOptions": "shortrun.models.score:ScoreOptions",
    "ScoreModelOptions": "shortrun.models.score:ScoreModelOptions",
    "BernoulliRBM": "shortrun.models.rbm:BernoulliRBM",
    "BernoulliRBMOptions": "shortrun.models.rbm:BernoulliRBMOptions",
    "GaussianBernoulliRBM": "shortrun.models.grbm:GaussianBernoulliRBM",
    "GaussianRBMOptions": "shortrun.models.grbm:GaussianRBMOptions",
    "GaussianBernoulliRBMOptions": "shortrun.models.grbm:GaussianBernoulliRBMOptions",
    "LEBM": "shortrun.models.lebm:LEBM",
    "LEBMOptions": "shortrun.models.lebm:LEBMOptions",
    "PriorTilt": "shortrun.models.lebm_nets:PriorTilt",
    "LEBMText": "shortrun.models.lebm_text:LEBMText",
    "LEBMTextOptions": "shortrun.models.lebm_text:LEBMTextOptions",
    "LatentDiffusionAmortizer": "shortrun.models.damc_nets:LatentDiffusionAmortizer",
    "DAMCChains": "shortrun.models.damc:DAMCChains",
    "DAMC": "shortrun.models.damc:DAMC",
    "DAMCOptions": "shortrun.models.damc:DAMCOptions",
    "build_amortizer": "shortrun.models.damc:build_amortizer",
    "ShortRunChains": "shortrun.models.latent_chains:ShortRunChains",
    "DualMCMC": "shortrun.models.dual_mcmc:DualMCMC",
    "DualMCMCOptions": "shortrun.models.dual_mcmc:DualMCMCOptions",
    "Classifier": "shortrun.models.classifier:Classifier",
    "ClassifierOptions": "shortrun.models.classifier:ClassifierOptions",
    "LstmLM": "shortrun.models.lstm_lm:LstmLM",
    "LstmLmOptions": "shortrun.models.lstm_lm:LstmLmOptions",
    "LstmLMOptions": "shortrun.models.lstm_lm:LstmLMOptions",
    "log_likelihood": "shortrun.evaluation.likelihood:log_likelihood",
    "NCE": "shortrun.models.chain_free:NCE",
    "ED": "shortrun.models.chain_free:ED",
    "ChainFreeOptions": "shortrun.models.chain_free:ChainFreeOptions",
    "ChainFreeEBMOptions": "shortrun.models.chain_free:ChainFreeEBMOptions",
    "EDRBM": "shortrun.models.ed_rbm:EDRBM",
    "EDLEBM": "shortrun.models.ed_lebm:EDLEBM",
    "EDLEBMOptions": "shortrun.models.ed_lebm:EDLEBMOptions",
    "JEM": "shortrun.models.jem:JEM",
    "JEMOptions": "shortrun.models.jem:JEMOptions",
}

__all__ = ["ConfigError", "ShortrunError", "__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'shortrun' has no attribute {name!r}")
    module, attr = target.split(":")
    if module.startswith("shortrun.models."):
        # a model's ``fit`` method runs shortrun.fit, which installs itself when imported
        importlib.import_module("shortrun.train.fit")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
