"""``shortrun config RECIPE``: every key of a resolved config with its type, bounds and doc.

The schema is the options dataclasses themselves: each field's type hint, and the bounds,
choices and doc string that :func:`shortrun.fields.fld` stores in the field's metadata. So the
listing can never drift from what :func:`shortrun.train.config.build_config` checks.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any

import yaml

from shortrun.train.config import SECTIONS, Config

SPEC_WIDTH = 30
BOUND_SIGNS = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))


@dataclass
class KeyInfo:
    """One config key: ``key`` is ``section.name``; ``default`` is the dataclass default."""

    key: str
    type: str
    bounds: str
    value: Any
    default: Any
    has_default: bool
    doc: str

    @property
    def differs(self) -> bool:
        """The recipe (or a ``--set``) chose a value other than the dataclass default."""
        return not self.has_default or _plain(self.value) != _plain(self.default)


def type_name(tp: Any) -> str:
    """``int | None``, ``tuple[float, float]``, ``list[str]``: a type hint as users write it."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]" if args else name
    if tp is type(None):
        return "None"
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))


def bounds_text(meta: typing.Mapping[str, Any]) -> str:
    """``"> 0"``, ``">= 0, < 1"`` or ``"one of fp32, bf16"`` from a field's metadata."""
    choices = meta.get("choices")
    if choices is not None:
        return "one of " + ", ".join(literal(c) for c in choices)
    parts = [f"{sign} {meta[name]:g}" for name, sign in BOUND_SIGNS
             if meta.get(name) is not None]
    return ", ".join(parts)


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def literal(value: Any) -> str:
    """A value as it is written in a recipe or after ``--set KEY=`` (a YAML literal)."""
    text = yaml.safe_dump(_plain(value), default_flow_style=True, width=1 << 30).strip()
    return text.removesuffix("...").strip()


def _default(f: dataclasses.Field) -> tuple[Any, bool]:
    if f.default is not dataclasses.MISSING:
        return f.default, True
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory(), True
    return None, False


def section_keys(section: str, options: Any) -> list[KeyInfo]:
    """One :class:`KeyInfo` per field of a section's options dataclass, in field order."""
    hints = typing.get_type_hints(type(options))
    out = []
    for f in dataclasses.fields(options):
        default, has_default = _default(f)
        if section == "model" and f.name == "name":  # "": each model class fills in its own
            default = options.name
        out.append(KeyInfo(key=f"{section}.{f.name}", type=type_name(hints[f.name]),
                           bounds=bounds_text(f.metadata), value=getattr(options, f.name),
                           default=default, has_default=has_default,
                           doc=str(f.metadata.get("doc", "") or "")))
    return out


def describe(cfg: Config) -> str:
    """The table ``shortrun config`` prints: a block per section, one line per key (key, type
    and bounds, value, and the default where the recipe differs), its doc string beneath."""
    lines = []
    if cfg.recipe or cfg.description:
        lines.append(f"# {cfg.recipe}: {cfg.description}".rstrip(": "))
    for section in SECTIONS:
        options = getattr(cfg, section)
        cls = type(options)
        summary = (cls.__doc__ or "").strip().splitlines()
        # a dataclass without a docstring gets a generated signature; it says nothing new
        about = summary[0] if summary and not summary[0].startswith(cls.__name__ + "(") else ""
        lines.append("")
        lines.append(f"[{section}] {cls.__name__}" + (f": {about}" if about else ""))
        keys = section_keys(section, options)
        width = max(len(k.key) for k in keys)
        # a long list of choices overflows its own line rather than widening every line
        spec_width = min(max(len(_spec(k)) for k in keys), SPEC_WIDTH)
        for k in keys:
            line = f"  {k.key:<{width}}  {_spec(k):<{spec_width}}  = {literal(k.value)}"
            if k.differs:
                line += (f"   (default {literal(k.default)})" if k.has_default
                         else "   (required)")
            lines.append(line.rstrip())
            if k.doc:
                lines.append(f"  {'':<{width}}    {k.doc}")
    return "\n".join(lines) + "\n"


def _spec(k: KeyInfo) -> str:
    return f"{k.type}, {k.bounds}" if k.bounds else k.type


def values_yaml(cfg: Config) -> str:
    """The resolved values alone, as the YAML recipe that reproduces them (what a run
    directory's ``config.yaml`` holds); ``shortrun train FILE.yaml`` accepts it as is."""
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)
