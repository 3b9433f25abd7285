"""bench/lebm_anomaly_protocol.py ``--collect``: the 3-seed table is built from the finished
seeds' result.json files, with mean ± sample std (ddof 1) per score variant, and the seeds
that went into each row named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "lebm_anomaly_protocol.py"
VARIANTS = ("joint", "joint_sigma", "tilt", "unweighted")


def write_result(out: Path, digit: int, seed: int, value: float) -> None:
    run = out / f"d{digit}" / f"s{seed}"
    run.mkdir(parents=True)
    variants = {v: {"test_auprc": value + 0.01 * i, "test_auprc_trapezoid": value + 0.01 * i}
                for i, v in enumerate(VARIANTS)}
    result = {"recipe": "lebm_mnist_anomaly", "digit": digit, "val_digit": (digit + 1) % 10,
              "seed": seed, "final": "same", "machine": "test machine", "prevalence": 0.351,
              "auprc_worst": 0.2, "auprc_trapezoid_worst": 0.2, "variants": variants}
    (run / "result.json").write_text(json.dumps(result))


def collect(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--collect", "--out", str(out),
                           "--digits", "4,5", "--seeds", "1,2,3", *extra],
                          capture_output=True, text=True, cwd=ROOT)


def test_collect_tabulates_mean_and_sample_std_of_the_finished_seeds(tmp_path):
    write_result(tmp_path, 4, 1, 0.5)
    write_result(tmp_path, 4, 3, 0.7)  # seed 2 unfinished: left out, and the row says so
    write_result(tmp_path, 5, 2, 0.4)
    proc = collect(tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| 4 (5)")]
    # joint: 0.5 and 0.7 -> mean 0.600, std (ddof 1) 0.1414; tilt is 0.02 higher on each seed
    assert rows[0].split(" | ")[1:7] == ["1,3", "0.351", "0.200", "0.600 ± 0.141",
                                         "0.610 ± 0.141", "0.620 ± 0.141"]
    assert rows[0].endswith("| 0.630 | 0.911 |")  # the paper and its successor beside it
    five = next(line for line in proc.stdout.splitlines() if line.startswith("| 5 (6)"))
    assert " | 2 | " in five and "0.400" in five and "±" not in five.split(" | ")[4]
    assert "final: same" in proc.stdout and "test machine" in proc.stdout
    assert "split: pooled;" in proc.stdout  # the recipe's split, named in the table's header


def test_collect_without_finished_seeds_says_what_to_run(tmp_path):
    proc = collect(tmp_path)
    assert proc.returncode != 0
    assert "no finished seed" in proc.stderr and "without --collect" in proc.stderr


def test_curve_reads_every_scored_stage_of_the_selection_run(tmp_path):
    """``--curve``: per stage, validation AP and test trapezoid AUPRC of the fixed-form
    scores, computed from the saved terms; a stage without test terms shows a dash."""
    import numpy as np

    sel = tmp_path / "d4" / "s1" / "select"
    sel.mkdir(parents=True)
    (sel / "config.yaml").write_text("data: {name: mnist}\nmodel: {name: lebm, llhd_sigma: 0.5}\n"
                                     "train: {steps: 20}\n")
    labels = np.array([0, 0, 1, 1])
    perfect = dict(sse=np.array([0.0, 0.1, 1.0, 2.0]), prior=np.zeros(4),
                   tilt=np.array([0.0, 0.1, 1.0, 2.0]))
    inverted = {k: -v for k, v in perfect.items()}
    np.savez(sel / "val_step10.npz", labels=labels, **perfect)
    np.savez(sel / "test_step10.npz", labels=labels, **inverted)
    np.savez(sel / "val_step20.npz", labels=labels, **perfect)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--curve", "--out", str(tmp_path),
                           "--digits", "4", "--seeds", "1"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| 4 | 1 |")]
    assert [r.split(" | ")[2] for r in rows] == ["10", "20"]
    joint10, tilt10 = rows[0].split(" | ")[3:5]
    assert joint10.startswith("1.000 / ") and float(joint10.split(" / ")[1]) < 0.6
    assert tilt10.startswith("1.000 / ")
    assert rows[1].split(" | ")[3] == "1.000 / –"


def _protocol_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("lebm_anomaly_protocol", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_recorded_choices_are_read_back_only_for_the_settings_they_were_made_for(tmp_path):
    """``--choices-from``: the choices of an earlier selection, checked against the recipe,
    digit, validation digit, seed and overrides of this run."""
    protocol = _protocol_module()
    write_result(tmp_path, 7, 2, 0.5)
    rec = json.loads((tmp_path / "d7" / "s2" / "result.json").read_text())
    rec["overrides"] = ["train.threads=1"]
    rec["variants"]["joint"].update(variant="joint", step=1500, sigma=0.3, val_auprc=0.8)
    rec["variants"]["tilt"].update(variant="tilt", step=3000, sigma=None, val_auprc=0.6)
    del rec["variants"]["joint_sigma"], rec["variants"]["unweighted"]
    path = tmp_path / "d7" / "s2" / "result.json"
    path.write_text(json.dumps(rec))
    got = protocol.recorded_choices(path, "lebm_mnist_anomaly", 7, 8, 2, ["train.threads=1"])
    assert got == {"joint": protocol.Choice("joint", 1500, 0.3, 0.8),
                   "tilt": protocol.Choice("tilt", 3000, None, 0.6)}
    with pytest.raises(SystemExit, match="seed"):
        protocol.recorded_choices(path, "lebm_mnist_anomaly", 7, 8, 3, ["train.threads=1"])
    with pytest.raises(SystemExit, match="overrides"):
        protocol.recorded_choices(path, "lebm_mnist_anomaly", 7, 8, 2, [])
    with pytest.raises(SystemExit, match="does not exist"):
        protocol.recorded_choices(tmp_path / "nothing.json", "lebm_mnist_anomaly", 7, 8, 2, [])


def test_choices_from_needs_a_retrained_final_model(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--choices-from", str(tmp_path),
                           "--final", "same", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode != 0 and "--final retrain" in proc.stderr
