import pytest

from shortrun.errors import DivergenceError
from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.config import resolve
from shortrun.train.trainer import Trainer, check_finite


def test_guard_messages(tmp_path):
    with pytest.raises(DivergenceError, match=r"at step 7: loss became nan; no checkpoint"):
        check_finite({"loss": float("nan")}, 1e6, 7, tmp_path, None)
    with pytest.raises(DivergenceError, match=r"energy_pos reached 2000, past "
                       r"train.energy_bound=1000.*step 5\), left intact"):
        check_finite({"energy_pos": 2000.0}, 1000.0, 9, tmp_path, 5)
    check_finite({"loss": 1.0, "energy_neg": -5.0}, 10.0, 1, tmp_path, None)


def test_diverging_run_keeps_last_good_checkpoint(tmp_path, tiny_ebm_overrides):
    cfg = resolve(None, [*tiny_ebm_overrides, "train.steps=20", "train.ckpt_every=3"])
    trainer = Trainer(cfg, tmp_path / "run")
    real_step = trainer.model.training_step

    def poisoned(batch, step, optimizers):
        metrics = real_step(batch, step, optimizers)
        if step == 7:  # the 8th update blows up
            metrics["energy_neg"] = float("inf")
        return metrics

    trainer.model.training_step = poisoned
    with pytest.raises(DivergenceError) as err:
        trainer.fit()
    message = str(err.value)
    assert "training diverged at step 8: energy_neg became inf" in message
    assert "(step 6), left intact" in message
    good = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt", "ebm")
    assert good["step"] == 6


def test_huge_learning_rate_is_caught(tmp_path, tiny_ebm_overrides):
    cfg = resolve(None, [*tiny_ebm_overrides, "train.steps=300", "train.lr=50.0",
                         "train.energy_bound=1e4"])
    with pytest.raises(DivergenceError, match="training diverged at step"):
        Trainer(cfg, tmp_path / "run").fit()
