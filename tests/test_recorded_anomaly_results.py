"""The anomaly results kept in bench/results/ are what docs/lebm.md and bench/README quote:
each ``result.json`` must say how it was made, and a retrained result that reused recorded
choices must have tested exactly those choices (same checkpoint step and σ′, made on
validation for the same recipe, digit and seed)."""

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
