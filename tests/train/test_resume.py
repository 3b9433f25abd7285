"""Resuming continues the same run: N straight == N/2 + resume + N/2, bit for bit."""

import json
import os
import signal
import subprocess
import sys
import time

import torch

from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.config import resolve
from shortrun.train.rundir import read_config
from shortrun.train.trainer import Trainer


def _params(run_dir):
    return load_checkpoint(run_dir / "checkpoints" / "last.pt")["model"]


def test_straight_equals_half_resume_half(tmp_path, tiny_ebm_overrides):
    n = 12
    straight = Trainer(resolve(None, [*tiny_ebm_overrides, f"train.steps={n}"]),
                       tmp_path / "straight")
    straight.fit()
    half = Trainer(resolve(None, [*tiny_ebm_overrides, f"train.steps={n // 2}"]),
                   tmp_path / "split")
    half.fit()
    cfg = read_config(tmp_path / "split", [f"train.steps={n}"])
    Trainer(cfg, tmp_path / "split", resume=True).fit()
    a, b = _params(tmp_path / "straight"), _params(tmp_path / "split")
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    steps = [json.loads(line)["step"] for line in
             (tmp_path / "split" / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == n


def test_resume_with_persistent_chains_and_epochs(tmp_path, tiny_ebm_overrides):
    no_steps = [o for o in tiny_ebm_overrides if not o.startswith("train.steps")]
    base = [*no_steps, "model.chain=persistent", "model.n_chains=128",
            "data.n_train=640", "train.epochs=2", "train.lr_decay=0.5",
            "train.lr=1e-3"]
    Trainer(resolve(None, base), tmp_path / "a").fit()
    Trainer(resolve(None, [*base, "train.epochs=1"]), tmp_path / "b").fit()
    Trainer(read_config(tmp_path / "b", ["train.epochs=2"]), tmp_path / "b", resume=True).fit()
    a, b = _params(tmp_path / "a"), _params(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)
    opt = load_checkpoint(tmp_path / "b" / "checkpoints" / "last.pt")["optimizers"]["main"]
    assert opt["param_groups"][0]["lr"] == 1e-3 * 0.25


def test_kill_minus_nine_then_resume(tmp_path):
    """A run killed at an arbitrary moment resumes from an intact last checkpoint."""
    run = tmp_path / "run"
    args = [sys.executable, "-m", "shortrun", "train", "--out", str(run),
            "--set", "train.steps=100000", "--set", "train.ckpt_every=1",
            "--set", "train.progress=false", "--set", "model.buffer_size=256",
            "--set", "model.hidden=16", "--set", "model.langevin_steps=2",
            "--set", "train.batch_size=32", "--set", "data.n_train=1000",
            "--set", "train.log_every=1", "--set", "train.sample_every=100000"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ckpt = run / "checkpoints" / "last.pt"
    deadline = time.time() + 60
    while time.time() < deadline and not ckpt.exists():
        time.sleep(0.05)
    time.sleep(0.7)  # let it get well into writing checkpoints every step
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert ckpt.exists(), proc.stderr.read().decode()
    step = load_checkpoint(ckpt, "ebm")["step"]
    assert step >= 1
    cfg = read_config(run, [f"train.steps={step + 3}"])
    result = Trainer(cfg, run, resume=True).fit()
    assert result.step == step + 3
    assert load_checkpoint(ckpt, "ebm")["step"] == step + 3
