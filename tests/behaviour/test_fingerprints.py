"""Every built-in recipe computes what it computed before the library redesign (issue 15).

See :mod:`fingerprint` for what is hashed. On the machine the record was made on, and on the
machines added with ``--add-machine``, the exact digest must match. Each tensor's ``Σx`` and
``Σ|x|`` must match to a relative 1e-4 on the recording machine. On another CPU only a loose
check is possible (:func:`fingerprint.summaries_agree_elsewhere`): two Adam steps there move
some parameters by a whole learning rate (a gradient within rounding of zero changes sign, and
Adam's first steps are ±lr whatever its size), so per-tensor sums of the classifier, DAMC and
Dual-MCMC recipes moved by up to 120 % on an AVX2 AMD EPYC against the AVX-512 record; that
machine's exact digests are recorded instead.
"""

from __future__ import annotations

import json
import os

import pytest

from .fingerprint import (
    RECORD,
    SYNTHETIC,
    machine_key,
    run_recipe,
    summaries_agree,
    summaries_agree_elsewhere,
)

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
    here = machine_key()
    exact = {RECORDED["machine"]: want["exact"],
             **{m: d[recipe] for m, d in RECORDED.get("exact_elsewhere", {}).items()
                if recipe in d}}
    if here in exact:
        assert got["exact"] == exact[here], f"{recipe}: bits changed on {here}"
    why = (summaries_agree(got["summary"], want["summary"], REL) if here == RECORDED["machine"]
           else summaries_agree_elsewhere(got["summary"], want["summary"]))
    assert why is None, f"{recipe}: {why}"


def test_the_record_covers_every_builtin_recipe() -> None:
    from shortrun.train.config import list_recipes

    assert sorted(RECORDED["recipes"]) == sorted(n for n, _ in list_recipes())
