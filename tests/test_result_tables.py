"""Every table of recorded results in docs/lebm.md, docs/damc.md and bench/README.md is what
bench/result_tables.py generates from the kept files under bench/results/: a number that
differs from its file, a block edited by hand or a table dropped from its page fails here."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "result_tables.py"
EXPECTED = {  # page -> the tables it must carry
    "docs/lebm.md": {"lebm-retrain", "lebm-select", "lebm-6000"},
    "docs/damc.md": {"damc-select", "damc-select-langevin", "damc-retrain",
                     "damc-variants-joint", "damc-variants-tilt", "damc-fd"},
    "bench/README.md": {"speed", "lebm-retrain", "damc-variants-joint", "damc-fd",
                        "ed-lebm-fd", "loglik-other", "loglik-latent", "loglik-betas", "jem"},
    "docs/losses.md": {"ed-lebm-fd", "ed-lebm-loglik"},
    "docs/jem.md": {"jem"},
}


@pytest.fixture
def tables():
    spec = importlib.util.spec_from_file_location("result_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_tables_are_the_generated_ones(tables):
    assert tables.stale() == [], "run: python bench/result_tables.py"


@pytest.mark.parametrize("page, names", sorted(EXPECTED.items()))
def test_each_page_carries_its_tables(tables, page, names):
    found = {m["name"] for m in tables.BLOCK.finditer((ROOT / page).read_text())}
    assert names <= found, f"{page} lacks the generated tables {names - found}"


def test_a_changed_result_file_makes_the_page_stale(tables, tmp_path, monkeypatch):
    """The check reads the numbers from the files: one seed's AUPRC moved by 0.1 moves the
    mean of three seeds by 0.033, and a page that quotes the table is reported (a page of its
    own here, so the check does not depend on the docs being present)."""
    shutil.copytree(tables.RESULTS, tmp_path / "results")
    monkeypatch.setattr(tables, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(tables, "ROOT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(tables.render("text\n<!-- table: lebm-retrain -->\n<!-- /table -->\n"))
    assert tables.stale(("page.md",)) == []
    before = tables.variant_table("lebm_anomaly_retrain", (4,))
    path = tmp_path / "results" / "lebm_anomaly_retrain" / "d4" / "s1" / "result.json"
    rec = json.loads(path.read_text())
    rec["variants"]["joint"]["test_auprc_trapezoid"] += 0.1
    path.write_text(json.dumps(rec))
    after = tables.variant_table("lebm_anomaly_retrain", (4,))
    assert after[2] != before[2] and after[2].startswith("| joint (the paper's score) | 0.592 ± ")
    assert tables.stale(("page.md",)) == ["page.md: table lebm-retrain"]


def test_a_cell_is_the_trapezoid_mean_and_sample_std_of_its_seeds(tables, tmp_path,
                                                                   monkeypatch):
    """Computed here from the three files with the standard library, not with the script. The
    files' average precision is set far from their trapezoid AUPRC, so a table that read the
    wrong key would show another number (the two agree to about 0.0002 in the real files)."""
    shutil.copytree(tables.RESULTS / "lebm_anomaly_retrain", tmp_path / "lebm_anomaly_retrain")
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    values = []
    for seed in (1, 2, 3):
        path = tmp_path / "lebm_anomaly_retrain" / "d7" / f"s{seed}" / "result.json"
        rec = json.loads(path.read_text())
        rec["variants"]["tilt"]["test_auprc"] = 0.1 * seed
        path.write_text(json.dumps(rec))
        values.append(rec["variants"]["tilt"]["test_auprc_trapezoid"])
    want = f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"
    row = next(r for r in tables.variant_table("lebm_anomaly_retrain", (7,))
               if r.startswith("| tilt |"))
    assert row == f"| tilt | {want} |"


def test_mean_and_sample_std_match_a_hand_computation(tables):
    # three seeds 0.5, 0.6, 0.7: mean 0.6, sample std (ddof 1) 0.1
    assert tables.mean_std([0.5, 0.6, 0.7]) == "0.600 ± 0.100"
    assert tables.mean_std([0.4321]) == "0.432"


def test_an_unknown_table_name_is_refused(tables):
    with pytest.raises(SystemExit, match="unknown table 'nope'; known: lebm-retrain"):
        tables.render("<!-- table: nope -->\n| x |\n<!-- /table -->")


# "mean ± std" figures the pages quote from runs that have no file under bench/results (the
# ablation, the Dual-MCMC and RBM seeds, DAMC with the paper's chain lengths): nothing to tie
NOT_IN_RESULTS = {"0.00006 ± 0.00016", "27.13 ± 2.5", "20.24 ± 1.4", "35.86 ± 3.8",
                  "0.0234 ± 0.0003", "0.0295 ± 0.0010", "0.0416 ± 0.0032", "143.04 ± 0.49",
                  "0.1322 ± 0.0154", "0.0907 ± 0.0007", "1.30 ± 0.28", "2.11 ± 0.11",
                  "0.16 ± 0.12", "1.19 ± 0.98",
                  # this wave's sections (test-set log-likelihoods, chain-free losses, JEM):
                  # measured from runs whose folders were not kept; each section names its
                  # command and machine
                  "54.26 ± 0.06", "39.74 ± 0.17", "48.22 ± 0.16", "39.88 ± 0.17", "21.29 ± 0.23",
                  "5.257 ± 0.155", "0.257 ± 0.336", "0.013 ± 0.007", "0.050 ± 0.006",
                  "0.065 ± 0.016", "0.023 ± 0.003", "0.039 ± 0.010",
                  "18.74 ± 0.16", "18.33 ± 0.06", "18.31 ± 0.08", "0.9991 ± 0.0002",
                  "0.79 ± 0.10", "90.9 ± 3.2", "95.7 ± 0.2", "98.9 ± 0.1", "0.105 ± 0.021",
                  "0.0088 ± 0.0005",
                  # the paper's JEM setting (20 steps, weight 1), three seeds of an earlier recipe
                  "6.70 ± 0.41"}


def test_every_mean_and_std_in_the_prose_is_a_generated_one(tables):
    """A "mean ± std" copied from a table into the prose is tied too: it must be a figure some
    generated table gives, unless it is listed above as coming from no kept file."""
    generated = " ".join(" ".join(make()) for make in tables.TABLES.values())
    for page in tables.DOCS:
        prose = re.sub(r"\s+", " ", tables.BLOCK.sub("", (ROOT / page).read_text()))
        for figure in re.findall(r"\d+\.\d+ ± \d+\.\d+", prose):
            assert figure in generated or figure in NOT_IN_RESULTS, (
                f"{page} quotes {figure}, which no file under bench/results gives: put it in a "
                "generated table (bench/result_tables.py) or fix it")
