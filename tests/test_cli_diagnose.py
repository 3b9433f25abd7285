"""``shortrun diagnose RUN_DIR``: long chains from a trained run, a table, the numbers in
eval.json, the traces and their picture in the run directory, and the report showing them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shortrun.cli import main
from shortrun.metrics.chains import summarize
from shortrun.report import write_report


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny ebm_8gaussians run (the overrides of conftest's ``tiny_ebm_overrides``) for
    every test of this file."""
    from conftest import TINY_EBM  # tests/ is on sys.path (rootdir conftest)

    out = tmp_path_factory.mktemp("diagnose") / "run"
    sets = [a for o in TINY_EBM for a in ("--set", o)]
    assert main(["train", "--out", str(out), *sets]) == 0
    return out


def test_diagnose_prints_a_table_and_writes_the_numbers(trained, capsys):
    code = main(["diagnose", str(trained), "--chains", "3", "--steps", "40"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "3 chains x 40 steps, first 20 dropped as warm-up" in out
    assert any(line.startswith("x ") for line in out.splitlines())
    result = json.loads((trained / "eval.json").read_text())
    assert result["step"] == 12
    with np.load(trained / "chains.npz") as f:
        energy = f["energy_x"]
        assert energy.shape == (1, 3, 40) and int(f["warmup"]) == 20
    again = summarize(energy[0, :, 20:])
    assert result["chain_rhat"] == result["chain_rhat_x"] == again["rhat"]
    assert result["chain_ess"] == min(again["ess_bulk"], again["ess_tail"])
    assert 0.0 <= result["accept"] == result["accept_x"] <= 1.0
    assert (result["chain_n"], result["chain_steps"], result["chain_warmup"]) == (3, 40, 20)
    assert (trained / "chains.png").stat().st_size > 0
    page = write_report(trained).read_text()
    assert "Chain diagnostics" in page and "chains.png" in page
    assert (trained / "report" / "chains.png").is_file()


@pytest.mark.parametrize("argv, words", [
    (["--chains", "1"], ["--chains >= 2", "got 1 chains"]),
    (["--steps", "3"], ["--steps >= 8"]),
    (["--warmup", "-0.1"], ["--warmup -0.1", "[0, 1)"]),
])
def test_bad_diagnose_arguments_are_one_line_and_leave_the_run(trained, capsys, argv, words):
    before = sorted(p.name for p in trained.iterdir())
    code = main(["diagnose", str(trained), *argv])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1
    for w in words:
        assert w in err, err
    assert sorted(p.name for p in trained.iterdir()) == before
    assert (trained / "checkpoints" / "last.pt").is_file()


def test_diagnose_of_a_folder_that_is_not_a_run(tmp_path, capsys):
    code = main(["diagnose", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code != 0 and "shortrun: error:" in err
