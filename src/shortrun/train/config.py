"""YAML recipes → typed dataclasses, with command-line overrides and strict checking.

A config has five sections: ``data``, ``model``, ``train``, ``sample``, ``eval``. ``data.name``
and ``model.name`` pick a dataset and a model; each brings its own options dataclass (see
:mod:`shortrun.data.registry` and :mod:`shortrun.models.registry`), so a key that the chosen
model does not understand is an error rather than silently ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from shortrun.errors import ConfigError
from shortrun.fields import check_bounds, fld

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
    log_every: int = fld(50, gt=0)
    sample_every: int = fld(1000, gt=0)
    ckpt_every: int = fld(500, gt=0)
    device: str = fld("cpu")
    threads: int | None = fld(None, gt=0, doc="torch intra-op threads; default: torch's")
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


def build_section(section: str, cls: type, values: dict[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in values.items():
        full = f"{section}.{key}"
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f" Did you mean {section}.{close[0]}?" if close else ""
            raise ConfigError(f"unknown key {full!r}.{hint} Keys in {section}: "
                              f"{', '.join(sorted(fields))}")
        value = coerce(full, value, hints[key])
        problem = check_bounds(full, value, dict(fields[key].metadata))
        if problem:
            raise ConfigError(problem)
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"{section}: {exc}") from None


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def coerce(key: str, value: Any, tp: Any) -> Any:
    """Check ``value`` against the type hint ``tp``; convert where lossless (int → float)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(key, value, arg)
            except ConfigError as exc:
                errors.append(str(exc))
        names = " or ".join(_type_name(a) for a in args)
        raise ConfigError(f"{key}: expected {names}; got {value!r}")
    if origin in (list, tuple):
        if isinstance(value, str) and origin is list:
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list; got {value!r}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise ConfigError(f"{key}: expected {len(args)} values; got {list(value)!r}")
            return tuple(coerce(key, v, a) for v, a in zip(value, args, strict=True))
        item = args[0] if args else Any
        return origin(coerce(key, v, item) for v in value)
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true or false; got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"{key}: expected an integer; got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{key}: expected a number; got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{key}: expected a string; got {value!r}")
    if dataclasses.is_dataclass(tp):
        return value
    raise ConfigError(f"{key}: unsupported option type {tp!r}")


def resolve(spec: str | None, overrides: list[str] | None = None) -> Config:
    """Recipe name or YAML path plus ``--set`` overrides → checked :class:`Config`."""
    name, raw = load_recipe(spec)
    return build_config(apply_overrides(raw, overrides or []), recipe=name)


def config_from_dict(raw: dict[str, Any]) -> Config:
    """Rebuild a :class:`Config` from the ``config.yaml`` a run directory holds."""
    return build_config(raw, recipe=str(raw.get("recipe", "")))


def save_config(cfg: Config, path: Path) -> None:
    path.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
