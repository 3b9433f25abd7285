"""LEBM end to end through the CLI on real MNIST: train, sample, eval (tiny sizes)."""

from __future__ import annotations

import json

import numpy as np

from shortrun.cli import main

TINY = ["data.n_train=200", "train.steps=3", "train.batch_size=50", "train.progress=false",
        "train.ckpt_every=3", "train.sample_every=3", "model.nz=4", "model.ngf=2",
        "model.ndf=8", "model.prior_steps=3", "model.post_steps=2", "model.eval_post_steps=1",
        "sample.n=4", "eval.batch_size=2000"]


def test_train_sample_eval_anomaly(tmp_path, data_dir, capsys):
    run = tmp_path / "run"
    sets = [a for kv in TINY for a in ("--set", kv)]
    assert main(["train", "lebm_mnist_anomaly", *sets, "--out", str(run),
                 "--data-dir", str(data_dir)]) == 0
    assert main(["sample", str(run), "--n", "4", "--out", str(tmp_path / "s.npz")]) == 0
    x = np.load(tmp_path / "s.npz")["x"]
    assert x.shape == (4, 1, 28, 28) and x.min() >= 0 and x.max() <= 255
    assert main(["eval", str(run), "--metrics", "auprc,mse", "--data-dir", str(data_dir)]) == 0
    got = json.loads((run / "eval.json").read_text())
    # the pooled split of Zenati et al.: every 1 of the 70k images, 20% of the 62,123 others
    assert 0 <= got["auprc"] <= 1 and got["mse"] > 0
    assert got["anomaly_n"] == 7877 and got["anomaly_n_normal"] == 62123 - int(62123 * 0.8)


def test_eval_unknown_metric_is_refused(tmp_path, data_dir, capsys):
    run = tmp_path / "run"
    sets = [a for kv in TINY for a in ("--set", kv)]
    assert main(["train", "lebm_mnist", *sets, "--out", str(run),
                 "--data-dir", str(data_dir)]) == 0
    assert main(["eval", str(run), "--metrics", "kl_grid"]) == 2
    assert "kl_grid not available for model 'lebm'; available: mse, fd, auprc" in \
        capsys.readouterr().err


def test_resume_continues_the_same_run_bit_for_bit(tmp_path, data_dir, monkeypatch):
    # Both optimisers, both lr schedules and the chains' RNG stream are in the checkpoint.
    import torch

    from shortrun.train.checkpoint import load_checkpoint
    from shortrun.train.config import resolve
    from shortrun.train.rundir import read_config
    from shortrun.train.trainer import Trainer

    monkeypatch.setenv("SHORTRUN_DATA", str(data_dir))
    base = [*TINY, "train.ckpt_every=1", "data.n_train=100", "train.lr_decay=0.5"]
    Trainer(resolve("lebm_mnist", [*base, "train.steps=4"]), tmp_path / "a").fit()
    Trainer(resolve("lebm_mnist", [*base, "train.steps=2"]), tmp_path / "b").fit()
    Trainer(read_config(tmp_path / "b", ["train.steps=4"]), tmp_path / "b", resume=True).fit()
    a, b = (load_checkpoint(tmp_path / r / "checkpoints" / "last.pt") for r in "ab")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert set(b["optimizers"]) == {"generator", "prior"}
    assert b["optimizers"]["prior"]["param_groups"][0]["lr"] == 5e-5 * 0.25
