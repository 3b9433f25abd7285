"""One name per model and its options class: ``X`` and ``XOptions`` (issue 42); the earlier
names stay importable as aliases of the same objects."""

from __future__ import annotations

import pytest

import shortrun
from shortrun.models.registry import MODELS, model_class


@pytest.mark.parametrize("name", sorted(MODELS))
def test_options_class_is_named_after_its_model(name):
    cls = model_class(name)
    wanted = {c.__name__ + "Options" for c in cls.__mro__}
    assert cls.Config.__name__ in wanted, (cls.__name__, cls.Config.__name__)


@pytest.mark.parametrize("old, new", [
    ("GaussianRBMOptions", "GaussianBernoulliRBMOptions"), ("LstmLmOptions", "LstmLMOptions"),
    ("ScoreOptions", "ScoreModelOptions"), ("DAMCChains", "DAMC"),
])
def test_earlier_names_are_aliases(old, new):
    assert getattr(shortrun, old) is getattr(shortrun, new)


def test_score_shorthands_are_the_one_score_model():
    for short, objective in (("DSM", "dsm"), ("SSM", "ssm"), ("SM", "sm")):
        cls = getattr(shortrun, short)
        assert issubclass(cls, shortrun.ScoreModel) and cls.name == objective
