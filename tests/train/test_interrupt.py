"""A run survives interruption: a signal or an error inside the loop leaves a checkpoint of the
current step, and the resumed run is bit-identical to one never interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from shortrun.cli import main
from shortrun.errors import DivergenceError
from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.config import resolve
from shortrun.train.rundir import read_config
from shortrun.train.trainer import Trainer

# no periodic checkpoint and no picture before the signal: only the stop itself can save
SLOW = ["train.steps=100000", "train.ckpt_every=100000", "train.sample_every=100000",
        "train.progress=false", "model.buffer_size=256", "model.hidden=16",
        "model.langevin_steps=2", "train.batch_size=32", "data.n_train=1000", "train.log_every=1"]


def _params(run_dir):
    return load_checkpoint(run_dir / "checkpoints" / "last.pt")["model"]


def _logged_steps(run):
    path = run / "metrics.jsonl"
    if not path.is_file():
        return 0
    steps = [json.loads(line)["step"] for line in path.read_text().splitlines()
             if line.endswith("}")]
    return max(steps, default=0)


def _interrupt(run, sig, after_steps=3):
    args = [sys.executable, "-m", "shortrun", "train", "--out", str(run)]
    for o in SLOW:
        args += ["--set", o]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.time() + 120
    while time.time() < deadline and _logged_steps(run) < after_steps and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, err


def test_sigint_before_the_first_checkpoint_saves_the_step_and_resumes_bit_identically(
        tmp_path):
    run = tmp_path / "run"
    code, err = _interrupt(run, signal.SIGINT)
    assert code == 130, err
    step = load_checkpoint(run / "checkpoints" / "last.pt", "ebm")["step"]
    assert step >= 3
    assert (f"interrupted at step {step}; checkpoint saved: resume with shortrun "
            f"train --resume {run}") in err
    assert "Traceback" not in err and err.strip().count("\n") == 0
    final = step + 3
    Trainer(read_config(run, [f"train.steps={final}"]), run, resume=True).fit()
    straight = tmp_path / "straight"
    Trainer(resolve(None, [*SLOW, f"train.steps={final}"]), straight).fit()
    a, b = _params(straight), _params(run)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_sigterm_saves_too_and_exits_143(tmp_path):
    run = tmp_path / "run"
    code, err = _interrupt(run, signal.SIGTERM, after_steps=1)
    assert code == 143, err
    step = load_checkpoint(run / "checkpoints" / "last.pt", "ebm")["step"]
    assert f"interrupted by SIGTERM at step {step}; checkpoint saved" in err


def _failing_at(trainer, fail_step, *, poison=False):
    original = trainer.model.training_step

    def step(batch, i, optimizers):
        if i + 1 == fail_step:
            if poison:
                with torch.no_grad():
                    next(trainer.model.parameters()).fill_(float("nan"))
            raise RuntimeError("boom")
        return original(batch, i, optimizers)

    trainer.model.training_step = step


def test_an_error_inside_the_loop_checkpoints_the_last_whole_step(tmp_path, tiny_ebm_overrides,
                                                                  capsys):
    cfg = resolve(None, [*tiny_ebm_overrides, "train.ckpt_every=1000"])
    trainer = Trainer(cfg, tmp_path / "run")
    _failing_at(trainer, 6)
    with pytest.raises(RuntimeError, match="boom"):
        trainer.fit()
    assert load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["step"] == 5
    err = capsys.readouterr().err
    assert "RuntimeError at step 6; checkpoint of step 5 saved" in err
    assert f"resume with shortrun train --resume {tmp_path / 'run'}" in err


def test_an_error_with_a_non_finite_state_saves_nothing_over_the_good_checkpoint(
        tmp_path, tiny_ebm_overrides, capsys):
    cfg = resolve(None, [*tiny_ebm_overrides, "train.ckpt_every=4"])
    trainer = Trainer(cfg, tmp_path / "run")
    _failing_at(trainer, 7, poison=True)
    with pytest.raises(RuntimeError, match="boom"):
        trainer.fit()
    state = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")
    assert state["step"] == 4
    assert all(torch.isfinite(v).all() for v in state["model"].values() if v.is_floating_point())
    assert "non-finite model state: not saved" in capsys.readouterr().err


def test_divergence_keeps_the_last_good_checkpoint(tmp_path, tiny_ebm_overrides):
    cfg = resolve(None, [*tiny_ebm_overrides, "train.ckpt_every=4", "train.energy_bound=1e-9"])
    with pytest.raises(DivergenceError, match="no checkpoint was written before it"):
        Trainer(cfg, tmp_path / "run").fit()
    assert not (tmp_path / "run" / "checkpoints" / "last.pt").exists()


def test_a_run_without_a_checkpoint_can_be_started_over(tmp_path, tiny_ebm_overrides, capsys):
    run = tmp_path / "run"
    cfg = resolve(None, tiny_ebm_overrides)
    Trainer(cfg, run)  # config written, killed before its first step
    (run / "metrics.jsonl").write_text('{"step": 3, "loss": 1.0}\n')
    sets = [a for o in tiny_ebm_overrides for a in ("--set", o)]
    assert main(["train", "--out", str(run), *sets]) == 2
    err = capsys.readouterr().err
    assert "stopped before its first checkpoint; start it over" in err
    assert f"shortrun train --resume {run}" in err and err.count("\n") == 1
    assert main(["train", "--resume", str(run)]) == 0
    assert "has no checkpoint yet: starting it over from step 0" in capsys.readouterr().err
    straight = tmp_path / "straight"
    Trainer(resolve(None, tiny_ebm_overrides), straight).fit()
    a, b = _params(straight), _params(run)
    assert all(torch.equal(a[k], b[k]) for k in a)
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [4, 8, 12]


def test_resuming_a_finished_run_says_so(tmp_path, tiny_ebm_overrides, capsys):
    run = tmp_path / "run"
    assert main(["train", "--out", str(run),
                 *[a for o in tiny_ebm_overrides for a in ("--set", o)]]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 0
    out, err = capsys.readouterr()
    assert "already finished at step 12" in err and "raise train.steps to continue" in err
    assert "loss=" in out  # the last logged metrics, not an empty line


def test_without_a_terminal_progress_lines_go_to_the_log(tmp_path, tiny_ebm_overrides, capsys):
    cfg = resolve(None, [*tiny_ebm_overrides, "train.progress=true", "train.progress_every_s=0"])
    Trainer(cfg, tmp_path / "run").fit()
    err = capsys.readouterr().err
    assert "step 3/12 (25%)" in err and "step 12/12 (100%)" in err and "steps/s" in err


def test_tensorboard_purges_steps_past_the_resume_point(tmp_path, tiny_ebm_overrides):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    run = tmp_path / "run"
    Trainer(resolve(None, [*tiny_ebm_overrides, "train.steps=8"]), run).fit()
    Trainer(read_config(run, ["train.steps=12"]), run, resume=True).fit()
    files = sorted((run / "tb").glob("events.out.tfevents.*"), key=lambda p: p.stat().st_mtime)
    starts = [e for e in EventFileLoader(str(files[-1])).Load()
              if e.HasField("session_log") and e.session_log.status == 1]  # SessionLog.START
    assert [e.step for e in starts] == [9]


def test_an_error_right_after_a_checkpoint_keeps_that_exact_checkpoint(
        tmp_path, tiny_ebm_overrides, capsys):
    cfg = resolve(None, [*tiny_ebm_overrides, "train.ckpt_every=4"])
    trainer = Trainer(cfg, tmp_path / "run")
    _failing_at(trainer, 5)
    with pytest.raises(RuntimeError, match="boom"):
        trainer.fit()
    assert load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["step"] == 4
    assert "RuntimeError at step 5; the checkpoint of step 4 is intact" in capsys.readouterr().err
