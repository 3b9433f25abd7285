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


WANT = [([4, 3], 1.5, 6.0), ([3], -0.2, 0.01), ([1000, 10], 3.0, 5000.0)]


def test_summaries_agree_names_what_moved_on_the_recording_machine() -> None:
    assert summaries_agree(WANT, WANT, REL) is None
    assert "added or removed" in summaries_agree(WANT[:2], WANT, REL)
    assert "shape" in summaries_agree([([3, 4], 1.5, 6.0), *WANT[1:]], WANT, REL)
    moved = [([4, 3], 1.5 + 6.0 * 2 * REL, 6.0), *WANT[1:]]
    assert "Σx" in summaries_agree(moved, WANT, REL)


def test_another_cpu_may_move_a_small_tensor_but_not_the_model() -> None:
    """A bias of Σ|x| 0.01 moving by 20 % is rounding-driven Adam drift; 30 % of it, or the
    model's total Σ|x| moving by more than 1e-3, is a change of behaviour."""
    drift = [WANT[0], ([3], 0.2, 0.012), WANT[2]]
    assert summaries_agree_elsewhere(drift, WANT) is None
    assert "Σ|x|" in summaries_agree_elsewhere([WANT[0], ([3], 0.2, 0.013), WANT[2]], WANT)
    total = [WANT[0], WANT[1], ([1000, 10], 3.0, 5000.0 * 1.002)]
    assert "total" in summaries_agree_elsewhere(total, WANT)
    assert "shape" in summaries_agree_elsewhere([([3, 4], 1.5, 6.0), *WANT[1:]], WANT)
