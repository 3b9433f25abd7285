"""Every built-in recipe computes what it computed before the library redesign (issue 15).

See :mod:`fingerprint` for what is hashed. On the machine the record was made on, the exact
digest must match; elsewhere each tensor's ``Σx`` and ``Σ|x|`` must match to a relative 1e-4
(two steps of float32 training on another BLAS move them by ~1e-6).
"""

from __future__ import annotations

import json
import math
import os

import pytest

from .fingerprint import RECORD, SYNTHETIC, machine_key, run_recipe

RECORDED = json.loads(RECORD.read_text())
REL = 1e-4
# datasets that need no files here: generated, bundled with scikit-learn, or synthetic stand-ins
FILE_FREE = {"8gaussians", "25gaussians", "rings", "checkerboard", "moons", "swissroll",
             "pinwheel", "spirals", "digits", *SYNTHETIC}


def _needs_files(recipe: str) -> bool:
    from shortrun.train.config import resolve

    return resolve(recipe).data.name not in FILE_FREE


@pytest.mark.parametrize("recipe", sorted(RECORDED["recipes"]))
def test_recipe_fingerprint_unchanged(recipe: str) -> None:
    if _needs_files(recipe) and not os.environ.get("SHORTRUN_DATA"):
        pytest.skip("needs SHORTRUN_DATA")
    want = RECORDED["recipes"][recipe]
    got = run_recipe(recipe)
    assert len(got["summary"]) == len(want["summary"]), "a tensor was added or removed"
    if machine_key() == RECORDED["machine"]:
        assert got["exact"] == want["exact"], f"{recipe}: bits changed on the recording machine"
    for (shape_g, sum_g, abs_g), (shape_w, sum_w, abs_w) in zip(
            got["summary"], want["summary"], strict=True):
        assert shape_g == shape_w
        scale = max(abs_w, 1e-12)
        assert math.isclose(sum_g, sum_w, rel_tol=REL, abs_tol=REL * scale), (recipe, shape_w)
        assert math.isclose(abs_g, abs_w, rel_tol=REL, abs_tol=1e-12), (recipe, shape_w)


def test_the_record_covers_every_builtin_recipe() -> None:
    from shortrun.train.config import list_recipes

    assert sorted(RECORDED["recipes"]) == sorted(n for n, _ in list_recipes())
