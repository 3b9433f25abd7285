"""The anomaly results kept in bench/results/ are what docs/lebm.md, docs/damc.md and
bench/README quote (tests/test_result_tables.py ties the tables to them): each ``result.json``
must say how it was made, and a retrained result that reused recorded choices must have tested
exactly those choices (same checkpoint step and σ′, made on validation for the same recipe,
digit and seed).

Provenance (commit with its dirty flag, route choices, training threads, CPU) is required of
every file except those listed in :data:`RECORDED_BEFORE_PROVENANCE`: the files written before
bench/lebm_anomaly_protocol.py recorded it, which cannot be regenerated. A new file must carry
it; a listed file that gains it must leave the list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RETRAINED_DIRS = ("lebm_anomaly_retrain", "damc_anomaly_retrain", "damc_short_anomaly_retrain",
                  "damc_2020_settings_anomaly_retrain")
PROTOCOL_DIRS = ("lebm_anomaly_protocol", "lebm_anomaly_protocol_6000", *RETRAINED_DIRS,
                 "damc_anomaly_protocol", "damc_anomaly_protocol_langevin")
RECORDED_BEFORE_PROVENANCE = {  # directory -> "d{digit}/s{seed}" written without provenance
    "damc_2020_settings_anomaly_retrain": "d4/s1 d5/s1 d7/s1 d9/s1 d9/s2 d9/s3",
    "damc_anomaly_protocol": "d4/s1 d4/s2 d4/s3 d5/s1 d5/s2 d5/s3 d7/s1 d7/s2 d7/s3 d9/s1 "
                             "d9/s2 d9/s3",
    "damc_anomaly_protocol_langevin": "d7/s1 d9/s1",
    "damc_anomaly_retrain": "d4/s1 d4/s2 d4/s3 d5/s1 d5/s2 d5/s3 d7/s1 d7/s2 d7/s3 d9/s1 "
                            "d9/s2 d9/s3",
    "damc_short_anomaly_retrain": "d4/s1 d5/s1 d7/s1 d9/s1",
    "lebm_anomaly_protocol": "d1/s2 d1/s3 d5/s2 d5/s3 d7/s2 d7/s3 d9/s2 d9/s3",
    "lebm_anomaly_protocol_6000": "d4/s1",
    "lebm_anomaly_retrain": "d1/s1 d1/s2 d1/s3 d4/s1 d4/s2 d4/s3 d5/s1 d5/s2 d5/s3 d7/s1 "
                            "d7/s2 d7/s3 d9/s1 d9/s2 d9/s3",
}
KEYS = ("recipe", "digit", "val_digit", "seed", "final", "overrides", "machine", "variants",
        "prevalence", "auprc_trapezoid_worst")


def kept(directory: str) -> list[Path]:
    return sorted((RESULTS / directory).glob("d*/s*/result.json"))


@pytest.mark.parametrize("directory", PROTOCOL_DIRS)
def test_each_kept_result_names_its_protocol_and_lies_between_worst_and_perfect(directory):
    files = kept(directory)
    assert files, f"bench/results/{directory} holds no result.json"
    for path in files:
        rec = json.loads(path.read_text())
        assert set(KEYS) <= rec.keys(), f"{path} lacks {set(KEYS) - rec.keys()}"
        assert path.parts[-3:-1] == (f"d{rec['digit']}", f"s{rec['seed']}"), path
        assert rec["val_digit"] != rec["digit"], path
        for name, v in rec["variants"].items():
            assert rec["auprc_trapezoid_worst"] - 1e-9 <= v["test_auprc_trapezoid"] <= 1, (
                path, name)


@pytest.mark.parametrize("directory", RETRAINED_DIRS)
def test_retrained_results_were_retrained_and_test_the_recorded_choices(directory):
    files = kept(directory)
    assert files
    for path in files:
        rec = json.loads(path.read_text())
        assert rec["final"] == "retrain", path
        if "choices_from" not in rec:
            continue
        source = ROOT / rec["choices_from"]
        assert source.is_file(), f"{path} reused choices from {source}, which is not kept"
        made = json.loads(source.read_text())
        for key in ("recipe", "digit", "val_digit", "seed", "overrides"):
            assert made[key] == rec[key], (path, key)
        assert made["variants"].keys() == rec["variants"].keys(), path
        for name, choice in made["variants"].items():
            tested = rec["variants"][name]
            assert (tested["step"], tested["sigma"], tested["val_auprc"]) == (
                choice["step"], choice["sigma"], choice["val_auprc"]), (path, name)


def recorded_before_provenance(path: Path) -> bool:
    directory, digit, seed = path.parts[-4:-1]
    return f"{digit}/{seed}" in RECORDED_BEFORE_PROVENANCE.get(directory, "").split()


@pytest.mark.parametrize("directory", PROTOCOL_DIRS)
def test_each_kept_result_records_its_provenance_unless_listed_as_older(directory):
    for path in kept(directory):
        rec = json.loads(path.read_text())
        if recorded_before_provenance(path):
            assert "provenance" not in rec, (
                f"{path} now records its provenance: drop it from RECORDED_BEFORE_PROVENANCE")
            continue
        prov = rec.get("provenance")
        assert prov is not None, (f"{path} has no provenance: keep only files written by the "
                                  "current bench/lebm_anomaly_protocol.py")
        assert {"commit", "dirty"} <= set(prov["scoring"]["git"]), path
        assert prov["scoring"]["cpu"] and "torch_threads" in prov["scoring"], path
        assert isinstance(prov["routes"], dict), path
        for run in prov["training"].values():
            assert "train_threads" in run and run["sessions"], path
            assert all({"git", "cpu", "torch_threads"} <= set(s) for s in run["sessions"]), path


def test_the_list_of_older_files_names_only_files_that_exist():
    for directory, names in RECORDED_BEFORE_PROVENANCE.items():
        for name in names.split():
            assert (RESULTS / directory / name / "result.json").is_file(), (directory, name)


@pytest.mark.parametrize("directory", PROTOCOL_DIRS)
def test_every_kept_result_ran_on_the_pooled_split(directory):
    """The docs mark these tables as run on the ``pooled`` split (Zenati et al.'s protocol as
    described, not their loader's ``zenati`` split): a kept file from another split needs its
    own table and its own label."""
    from shortrun.train.config import resolve

    for path in kept(directory):
        rec = json.loads(path.read_text())
        assert resolve(rec["recipe"], rec["overrides"]).data.anomaly_split == "pooled", path
