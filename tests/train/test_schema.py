"""The schema `shortrun config` prints comes from the options dataclasses themselves."""

from __future__ import annotations

import dataclasses

import yaml

from shortrun.fields import fld
from shortrun.train.config import TrainConfig, resolve
from shortrun.train.schema import bounds_text, describe, literal, section_keys, type_name


def test_type_names_read_as_written():
    assert type_name(int) == "int"
    assert type_name(int | None) == "int | None"
    assert type_name(tuple[float, float]) == "tuple[float, float]"
    assert type_name(list[str]) == "list[str]"
    assert type_name(str | None) == "str | None"


def test_bounds_and_choices_from_field_metadata():
    @dataclasses.dataclass
    class Options:
        rate: float = fld(0.5, ge=0, lt=1, doc="a fraction")
        mode: str = fld("a", choices=("a", "b"))
        plain: int = 3

    meta = {f.name: f.metadata for f in dataclasses.fields(Options)}
    assert bounds_text(meta["rate"]) == ">= 0, < 1"
    assert bounds_text(meta["mode"]) == "one of a, b"
    assert bounds_text(meta["plain"]) == ""
    rate, mode, plain = section_keys("model", Options(rate=0.25))
    assert (rate.key, rate.type, rate.value, rate.default, rate.doc) == (
        "model.rate", "float", 0.25, 0.5, "a fraction")
    assert rate.differs and not mode.differs and not plain.differs


def test_literals_are_what_set_accepts():
    for value in (None, True, 0.001, 3, "fp32", [0.9, 0.999], []):
        shown = literal(value)
        assert yaml.safe_load(shown) == value, shown
    assert literal((0.5, 0.999)) == "[0.5, 0.999]"
    assert literal(None) == "null"


def test_every_key_of_every_section_is_listed():
    cfg = resolve("ebm_8gaussians")
    text = describe(cfg)
    for section in ("data", "model", "train", "sample", "eval"):
        assert f"[{section}]" in text
        for f in dataclasses.fields(getattr(cfg, section)):
            assert f"  {section}.{f.name} " in text, f"{section}.{f.name}"
    assert len([f for f in dataclasses.fields(TrainConfig)]) == text.count("\n  train.")
