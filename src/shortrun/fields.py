"""Typed, checked config fields: dataclass fields that carry their own bounds and choices.

A recipe value is checked against the field's type hint and these bounds when the config is
built, so a wrong value fails at start-up with the key named, never mid-run.
"""

from __future__ import annotations

import dataclasses
from typing import Any


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
