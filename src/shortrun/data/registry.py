"""Dataset names → their options dataclass and loader, imported lazily."""

from __future__ import annotations

import difflib
import importlib

from shortrun.data.base import DataOptions, LoadedData
from shortrun.errors import ConfigError

# name -> "module:OptionsClass:loader_function"
DATASETS: dict[str, str] = {
    "8gaussians": "shortrun.data.toy2d:ToyOptions:load_toy",
    "25gaussians": "shortrun.data.toy2d:ToyOptions:load_toy",
    "rings": "shortrun.data.toy2d:ToyOptions:load_toy",
    "checkerboard": "shortrun.data.toy2d:ToyOptions:load_toy",
    "moons": "shortrun.data.toy2d:ToyOptions:load_toy",
    "swissroll": "shortrun.data.toy2d:ToyOptions:load_toy",
    "pinwheel": "shortrun.data.toy2d:ToyOptions:load_toy",
    "spirals": "shortrun.data.toy2d:ToyOptions:load_toy",
    "digits": "shortrun.data.digits:DigitsOptions:load_digits",
    "mnist": "shortrun.data.mnist:MnistOptions:load_mnist",
    "fashion": "shortrun.data.mnist:MnistOptions:load_mnist",
    "svhn": "shortrun.data.svhn:SvhnOptions:load_svhn",
    "cifar10": "shortrun.data.cifar10:Cifar10Options:load_cifar10",
    "celeba64": "shortrun.data.celeba:CelebaOptions:load_celeba",
    "ptb": "shortrun.data.ptb:PtbOptions:load_ptb",
    "array": "shortrun.data.array:ArrayOptions:load_array",
    "npz": "shortrun.data.array:NpzOptions:load_npz",
}


def _entry(name: str) -> tuple[str, str, str]:
    if name not in DATASETS:
        close = difflib.get_close_matches(name, list(DATASETS), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"data.name: unknown dataset {name!r}.{hint} "
                          f"Known: {', '.join(sorted(DATASETS))}")
    module, options, loader = DATASETS[name].split(":")
    return module, options, loader


def dataset_options(name: str) -> type[DataOptions]:
    module, options, _ = _entry(name)
    return getattr(importlib.import_module(module), options)


def load_data(options: DataOptions) -> LoadedData:
    """The dataset ``options.name``, stamped with that name in ``extras["dataset"]`` and with
    ``options`` in ``extras["dataset_options"]``, so that a Trainer handed it in Python knows
    whether it is the set its config names (the same name and options) or the user's own data."""
    module, _, loader = _entry(options.name)
    data = getattr(importlib.import_module(module), loader)(options)
    data.extras.setdefault("dataset", options.name)
    data.extras.setdefault("dataset_options", options)
    return data
