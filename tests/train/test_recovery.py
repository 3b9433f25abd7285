"""Automatic recovery (``train.recover``): a divergence rolls back to the last good checkpoint
with the learning rate lowered, at most N times, logged in metrics.jsonl and provenance.json."""

from __future__ import annotations

import json

import pytest

from shortrun.errors import DivergenceError
from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.config import resolve
from shortrun.train.recovery import Recovery
from shortrun.train.trainer import Trainer


def poisoned_trainer(tmp_path, overrides, nan_at: set[int], once: bool = True) -> Trainer:
    trainer = Trainer(resolve(None, overrides), tmp_path / "run")
    real_step = trainer.model.training_step

    def step_fn(batch, step, optimizers):
        metrics = real_step(batch, step, optimizers)
        if step in nan_at:  # a NaN injected into this update's metrics
            metrics["loss"] = float("nan")
            if once:
                nan_at.discard(step)
        return metrics

    trainer.model.training_step = step_fn
    return trainer


def test_recovery_rolls_back_to_the_last_checkpoint_and_lowers_the_lr(tmp_path,
                                                                      tiny_ebm_overrides):
    lr = 1e-3
    over = [*tiny_ebm_overrides, "train.steps=12", "train.ckpt_every=3", f"train.lr={lr}",
            "train.log_every=1", "train.recover=2", "train.recover_lr_factor=0.25"]
    trainer = poisoned_trainer(tmp_path, over, {7})
    result = trainer.fit()
    assert result.step == 12
    run = tmp_path / "run"
    state = load_checkpoint(run / "checkpoints" / "last.pt", "ebm")
    assert state["optimizers"]["main"]["param_groups"][0]["lr"] == pytest.approx(lr * 0.25)
    events = [e for e in json.loads((run / "provenance.json").read_text())
              if e["event"] == "recovery"]
    assert len(events) == 1
    assert events[0]["step"] == 6 and events[0]["diverged_at"] == 8
    assert events[0]["lr"]["main"] == pytest.approx(lr * 0.25)
    assert "loss became nan" in events[0]["reason"]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in rows if "recovered" not in r]
    assert steps == list(range(1, 13))  # the rows past step 6 of the diverged attempt dropped
    assert [r["step"] for r in rows if "recovered" in r] == [6]


def test_recovery_before_the_first_checkpoint_goes_back_to_step_zero(tmp_path,
                                                                      tiny_ebm_overrides):
    over = [*tiny_ebm_overrides, "train.steps=4", "train.ckpt_every=100", "train.recover=1"]
    trainer = poisoned_trainer(tmp_path, over, {1})
    assert trainer.fit().step == 4
    assert trainer.recovery.events[0]["step"] == 0


def test_recovery_gives_up_after_n_tries(tmp_path, tiny_ebm_overrides):
    over = [*tiny_ebm_overrides, "train.steps=12", "train.ckpt_every=3", "train.recover=2",
            "train.lr=1e-3"]
    trainer = poisoned_trainer(tmp_path, over, {7}, once=False)
    with pytest.raises(DivergenceError, match=r"at step 8: loss became nan.*\(2 automatic "
                                              r"recoveries already spent, train.recover=2\)"):
        trainer.fit()
    assert len(trainer.recovery.events) == 2
    assert trainer.optimizers["main"].param_groups[0]["lr"] == pytest.approx(1e-3 * 0.25)


def test_without_recovery_a_divergence_stops_the_run(tmp_path, tiny_ebm_overrides):
    over = [*tiny_ebm_overrides, "train.steps=12", "train.ckpt_every=3"]
    trainer = poisoned_trainer(tmp_path, over, {7})
    with pytest.raises(DivergenceError, match=r"at step 8: loss became nan.*\(step 6\), left "
                                              r"intact"):
        trainer.fit()


def test_bad_recovery_options_name_the_key():
    with pytest.raises(ValueError, match=r"train.recover must be >= 0"):
        Recovery(-1)
    with pytest.raises(ValueError, match=r"train.recover_lr_factor must lie in \(0, 1\)"):
        Recovery(1, 1.5)
    from shortrun.errors import ConfigError

    with pytest.raises(ConfigError, match=r"train.recover_lr_factor"):
        resolve(None, ["train.recover_lr_factor=2"])
