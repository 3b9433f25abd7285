"""Typed, checked config fields: dataclass fields that carry their own bounds and choices.

A recipe value is checked against the field's type hint and these bounds when the config is
built, so a wrong value fails at start-up with the key named, never mid-run.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any

from shortrun.errors import ConfigError


def fld(
    default: Any = dataclasses.MISSING,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    choices: tuple[Any, ...] | None = None,
    doc: str = "",
) -> Any:
    """A dataclass field with bounds (``gt``/``ge``/``lt``/``le``) or allowed ``choices``."""
    meta = {"gt": gt, "ge": ge, "lt": lt, "le": le, "choices": choices, "doc": doc}
    if isinstance(default, (list, dict, tuple)):
        frozen = default
        return dataclasses.field(default_factory=lambda: type(frozen)(frozen), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def check_bounds(key: str, value: Any, meta: dict[str, Any]) -> str | None:
    """Return a message if ``value`` breaks the field's bounds, else None."""
    if value is None:
        return None
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        return f"{key}: must be one of {allowed}; got {value!r}"
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, (int, float)) or isinstance(item, bool):
            continue
        for name, op, text in (
            ("gt", lambda a, b: a > b, ">"),
            ("ge", lambda a, b: a >= b, ">="),
            ("lt", lambda a, b: a < b, "<"),
            ("le", lambda a, b: a <= b, "<="),
        ):
            bound = meta.get(name)
            if bound is not None and not op(item, bound):
                return f"{key}: must be {text} {bound}; got {item!r}"
    return None


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
