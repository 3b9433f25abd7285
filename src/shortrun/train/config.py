"""YAML recipes → typed dataclasses, with command-line overrides and strict checking.

A config has five sections: ``data``, ``model``, ``train``, ``sample``, ``eval``. ``data.name``
and ``model.name`` pick a dataset and a model; each brings its own options dataclass (see
:mod:`shortrun.data.registry` and :mod:`shortrun.models.registry`), so a key that the chosen
model does not understand is an error rather than silently ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from shortrun.errors import ConfigError
from shortrun.fields import build_section, coerce, fld

__all__ = ["Config", "build_config", "build_section", "coerce", "make_config", "resolve"]

SECTIONS = ("data", "model", "train", "sample", "eval")


@dataclass
class TrainConfig:
    """Options of the one training loop, understood by every recipe."""

    seed: int = fld(0, ge=0)
    batch_size: int = fld(128, gt=0)
    epochs: int | None = fld(None, gt=0, doc="used when train.steps is not set")
    steps: int | None = fld(None, gt=0, doc="wins over train.epochs when both are set")
    lr: float = fld(1e-3, gt=0)
    betas: tuple[float, float] = fld((0.9, 0.999), ge=0.0, lt=1.0)
    weight_decay: float = fld(0.0, ge=0)
    lr_decay: float = fld(1.0, gt=0, le=1.0, doc="learning-rate factor applied once per epoch")
    grad_clip: float | None = fld(None, gt=0, doc="max parameter-gradient norm")
    energy_bound: float = fld(1e6, gt=0, doc="|energy| past this stops the run as diverged")
    recover: int = fld(0, ge=0, doc="on divergence, roll back to the last checkpoint with a "
                        "lower lr, at most this many times (0: stop, as before)")
    recover_lr_factor: float = fld(0.5, gt=0, lt=1.0, doc="lr factor of each recovery")
    log_every: int = fld(50, gt=0)
    sample_every: int = fld(1000, gt=0)
    ckpt_every: int = fld(500, gt=0)
    device: str = fld("cpu")
    threads: int | None = fld(None, gt=0, doc="torch intra-op threads; default: torch's")
    routes: str = fld("auto", doc="auto: the faster route per product, timed on this machine; "
                                  "fixed: no timing, each family's fixed route; a run's "
                                  "provenance.json or run dir: replay the routes it used")
    progress: bool = True
    progress_every_s: float = fld(30.0, ge=0, doc="without a terminal (nohup, CI, a batch "
                                  "scheduler): seconds between progress lines on stderr")
    precision: str = fld("fp32", choices=("fp32", "bf16"),
                         doc="bf16: training steps run under torch.autocast(bfloat16)")
    compile: bool = fld(False, doc="torch.compile the model's networks (chains included)")
    compile_backend: str = fld("inductor", choices=("inductor", "aot_eager", "eager"))


@dataclass
class SampleConfig:
    """Options of ``shortrun sample`` and of the sample grids drawn during training."""

    n: int = fld(64, gt=0)
    batch_size: int = fld(500, gt=0)
    steps: int | None = fld(None, gt=0, doc="chain length; default: the training chain's")
    seed: int = fld(0, ge=0)


@dataclass
class EvalConfig:
    """Options of ``shortrun eval``."""

    metrics: list[str] = fld([], doc="empty: the model's default metrics")
    n_samples: int = fld(2000, gt=0)
    batch_size: int = fld(500, gt=0)
    seed: int = fld(0, ge=0)
    extractor: str | None = fld(None, doc="feature extractor for fd/kid; default per dataset")


@dataclass
class Config:
    data: Any
    model: Any
    train: TrainConfig
    sample: SampleConfig
    eval: EvalConfig
    recipe: str = ""
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"recipe": self.recipe, "description": self.description}
        for name in SECTIONS:
            out[name] = _plain(dataclasses.asdict(getattr(self, name)))
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# ----------------------------------------------------------------------------- recipes


def recipes_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "recipes"


def list_recipes() -> list[tuple[str, str]]:
    """``(name, description)`` of every built-in recipe, sorted by name."""
    out = []
    for path in sorted(recipes_dir().glob("*.yaml")):
        raw = yaml.safe_load(path.read_text()) or {}
        out.append((path.stem, str(raw.get("description", "")).strip()))
    return out


DEFAULT_RECIPE = "ebm_8gaussians"


def load_recipe(spec: str | None) -> tuple[str, dict[str, Any]]:
    """Read a built-in recipe by name, or a YAML file by path. Returns (name, raw dict)."""
    spec = spec or DEFAULT_RECIPE
    path = Path(spec)
    if spec.endswith((".yaml", ".yml")):
        if not path.is_file():
            raise ConfigError(f"recipe file {spec!r} does not exist; give a path to a YAML file "
                              "or a built-in name from `shortrun recipes`")
        name = path.stem
    else:
        path = recipes_dir() / f"{spec}.yaml"
        if not path.is_file():
            names = [n for n, _ in list_recipes()]
            close = difflib.get_close_matches(spec, names, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"unknown recipe {spec!r}.{hint} `shortrun recipes` lists them all.")
        name = spec
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"recipe {str(path)!r} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"recipe {str(path)!r} must be a mapping of sections {SECTIONS}")
    return name, raw


# ----------------------------------------------------------------------------- overrides


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"train.lr=1e-3"`` → (["train", "lr"], 0.001). Values are YAML literals."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, for example --set train.lr=1e-3")
    key, _, value = text.partition("=")
    parts = key.strip().split(".")
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"--set {text!r}: the key must be SECTION.NAME with SECTION one of "
                          f"{', '.join(SECTIONS)}")
    try:
        parsed = yaml.safe_load(value) if value.strip() else None
    except yaml.YAMLError:
        parsed = value
    return parts, parsed


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``raw`` with ``--set`` overrides applied.

    Setting one of ``train.steps``/``train.epochs`` on the command line clears the other
    unless both are given, so a recipe's epoch budget never silently beats ``--set train.steps``.
    """
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}
    given = []
    for text in overrides:
        (section, key), value = parse_override(text)
        if section not in SECTIONS:
            raise ConfigError(f"--set {text!r}: unknown section {section!r}; "
                              f"sections are {', '.join(SECTIONS)}")
        out.setdefault(section, {})
        if not isinstance(out[section], dict):
            out[section] = {}
        out[section][key] = value
        given.append((section, key))
    train = out.get("train", {})
    if ("train", "steps") in given and ("train", "epochs") not in given:
        train["epochs"] = None
    if ("train", "epochs") in given and ("train", "steps") not in given:
        train["steps"] = None
    return out


# ----------------------------------------------------------------------------- building


def build_config(raw: dict[str, Any], recipe: str = "") -> Config:
    """Check a raw dict strictly and build the typed :class:`Config`."""
    from shortrun.data.registry import dataset_options
    from shortrun.models.registry import model_class

    unknown = set(raw) - set(SECTIONS) - {"description", "recipe"}
    if unknown:
        key = sorted(unknown)[0]
        raise ConfigError(f"unknown section {key!r}; a recipe has sections "
                          f"{', '.join(SECTIONS)} (and an optional description)")
    for section in SECTIONS:
        if raw.get(section) is not None and not isinstance(raw[section], dict):
            raise ConfigError(f"{section}: must be a mapping of keys to values")
    data_raw = dict(raw.get("data") or {})
    model_raw = dict(raw.get("model") or {})
    if "name" not in model_raw:
        raise ConfigError("model.name: missing; set it to one of the models in "
                          "`shortrun recipes` (for example ebm, lebm, rbm)")
    if "name" not in data_raw:
        raise ConfigError("data.name: missing; for example 8gaussians, digits, mnist")
    model_cls = model_class(str(model_raw["name"]))
    data_cls = dataset_options(str(data_raw["name"]))
    cfg = Config(
        data=build_section("data", data_cls, data_raw),
        model=build_section("model", model_cls.Config, model_raw),
        train=build_section("train", TrainConfig, raw.get("train") or {}),
        sample=build_section("sample", SampleConfig, raw.get("sample") or {}),
        eval=build_section("eval", EvalConfig, raw.get("eval") or {}),
        recipe=str(raw.get("recipe") or recipe),
        description=str(raw.get("description") or ""),
    )
    if cfg.train.steps is None and cfg.train.epochs is None:
        raise ConfigError("train.steps / train.epochs: set one of them (a positive integer)")
    check = getattr(cfg.model, "check", None)
    if callable(check):
        check(cfg)
    return cfg


def resolve(spec: str | None, overrides: list[str] | None = None) -> Config:
    """Recipe name or YAML path plus ``--set`` overrides → checked :class:`Config`."""
    name, raw = load_recipe(spec)
    return build_config(apply_overrides(raw, overrides or []), recipe=name)


def make_config(*, model: Any, data: Any, train: Any = None, sample: Any = None,
                eval: Any = None, recipe: str = "", description: str = "") -> Config:  # noqa: A002
    """The Python twin of a YAML recipe: each section a dict (or an options dataclass) with
    the recipe's keys, checked by the same code, so ``make_config(**sections)`` equals
    ``resolve("recipe.yaml")`` for the same values.

    >>> cfg = make_config(model={"name": "rbm", "n_hidden": 16}, data={"name": "digits",
    ...                   "binarize": True}, train={"steps": 100})
    """
    raw: dict[str, Any] = {"recipe": recipe, "description": description}
    for name, value in (("model", model), ("data", data), ("train", train),
                        ("sample", sample), ("eval", eval)):
        if value is None:
            continue
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            options = value
            value = _plain(dataclasses.asdict(options))
            if name == "model" and not value.get("name"):  # EBMOptions(): its model's name
                from shortrun.models.registry import registered_name_of_options

                value["name"] = registered_name_of_options(type(options))
        if not isinstance(value, dict):
            raise ConfigError(f"make_config({name}=...): expected a dict of {name} keys or an "
                              f"options dataclass; got {type(value).__name__}")
        raw[name] = dict(value)
    return build_config(raw, recipe=recipe)


def config_from_dict(raw: dict[str, Any]) -> Config:
    """Rebuild a :class:`Config` from the ``config.yaml`` a run directory holds."""
    return build_config(raw, recipe=str(raw.get("recipe", "")))


def save_config(cfg: Config, path: Path) -> None:
    path.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
