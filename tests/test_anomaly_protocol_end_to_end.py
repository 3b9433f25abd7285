"""bench/lebm_anomaly_protocol.py end to end at a tiny size: ``one_seed`` trains the selection
run in stages, scores validation, chooses, retrains and scores the test split once
(``final_test``). The test labels must never reach a choice: with every test label poisoned
(shuffled), each variant's chosen step, σ′ and validation AP are identical, while the test
AUPRCs move (so the poison did reach the test scoring). Each ``result.json`` records its
provenance."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from shortrun.cli import main as shortrun_main

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "lebm_anomaly_protocol.py"
TINY = ["train.threads=1", "train.batch_size=20", "train.ckpt_every=1", "train.log_every=1",
        "train.sample_every=1000", "model.nz=2", "model.ngf=2", "model.ndf=4",
        "model.prior_steps=2", "model.post_steps=2", "model.eval_post_steps=1", "sample.n=4",
        "eval.batch_size=500"]


def protocol_module():
    spec = importlib.util.spec_from_file_location("lebm_anomaly_protocol", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_mnist(folder: Path) -> None:
    """300 training and 100 test images of random pixels, labels 0..9 in turn."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (400, 28, 28)).astype(np.uint8)
    y = (np.arange(400) % 10).astype(np.uint8)
    np.savez(folder / "mnist.npz", x_train=x[:300], y_train=y[:300], x_test=x[300:],
             y_test=y[300:])


@pytest.fixture
def protocol(tmp_path, monkeypatch):
    """The protocol module with its training in this process (``shortrun train`` through the
    CLI's ``main``, not a subprocess: seconds instead of a torch import per stage), the data
    in a tiny folder, and the routes pinned so two runs do the same arithmetic."""
    data = tmp_path / "data"
    data.mkdir()
    tiny_mnist(data)
    monkeypatch.setenv("SHORTRUN_DATA", str(data))
    monkeypatch.setenv("SHORTRUN_ROUTE", "torch")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    module = protocol_module()

    def in_process(*args: str) -> None:
        assert shortrun_main(list(args)) == 0, args

    monkeypatch.setattr(module, "shortrun", in_process)
    threads = torch.get_num_threads()
    yield module
    torch.set_num_threads(threads)


def poison_test_labels(monkeypatch) -> None:
    """Every loader call returns the test split's labels shuffled: what a protocol that read
    test labels before choosing would see change."""
    import shortrun.data.mnist as mnist

    clean = mnist.load_mnist

    def poisoned(options):
        data = clean(options)
        perm = torch.from_numpy(np.random.RandomState(7).permutation(len(data.test_labels)))
        data.test_labels = data.test_labels[perm]
        return data

    monkeypatch.setattr(mnist, "load_mnist", poisoned)


def run_seed(protocol, out: Path, final: str) -> dict:
    return protocol.one_seed("lebm_mnist_anomaly", out, digit=1, val_digit=2, seed=1,
                             steps=[2, 4], sets=list(TINY), val_fraction=0.2, final=final)


def choices(result: dict) -> dict:
    return {v: (c["step"], c["sigma"], c["val_auprc"]) for v, c in result["variants"].items()}


@pytest.mark.parametrize("final", ["retrain", "same"])
def test_poisoned_test_labels_change_no_choice(protocol, tmp_path, monkeypatch, final):
    clean = run_seed(protocol, tmp_path / "clean", final)
    poison_test_labels(monkeypatch)
    dirty = run_seed(protocol, tmp_path / "poisoned", final)
    assert set(clean["variants"]) == {"joint", "joint_sigma", "tilt", "unweighted"}
    assert choices(dirty) == choices(clean)
    assert {c["step"] for c in clean["variants"].values()} <= {2, 4}
    # the poison reached the test scoring: some test AUPRC moved (same scores, other labels)
    moved = [v for v in clean["variants"] if clean["variants"][v]["test_auprc"]
             != dirty["variants"][v]["test_auprc"]]
    assert moved, "the poisoned labels did not reach the test split"
    test_run = "final" if final == "retrain" else "select"
    for step in {c["step"] for c in clean["variants"].values()}:
        assert (tmp_path / "clean" / "d1" / "s1" / test_run / f"test_step{step}.npz").is_file()
    written = json.loads((tmp_path / "clean" / "d1" / "s1" / "result.json").read_text())
    assert choices(written) == choices(clean) and written["final"] == final


def test_result_records_commit_threads_cpu_and_routes(protocol, tmp_path):
    result = run_seed(protocol, tmp_path / "out", "retrain")
    prov = result["provenance"]
    assert set(prov) == {"scoring", "training", "routes"}
    assert {"git", "cpu", "torch_threads", "argv"} <= set(prov["scoring"])
    assert set(prov["training"]) == {"select", "final"}
    for run in prov["training"].values():
        assert run["train_threads"] == 1
        assert run["sessions"] and {"git", "cpu", "torch_threads", "step"} <= set(
            run["sessions"][0])
    # the selection run trained in two stages: a start, then a resume
    assert [s["event"] for s in prov["training"]["select"]["sessions"]] == ["start", "resume"]
    assert isinstance(prov["routes"], dict)
