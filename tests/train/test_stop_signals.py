"""Stopping, in process: one Ctrl-C ends the run at the step boundary with a checkpoint of that
step; a second Ctrl-C during the same step stops at once and saves nothing over the last good
checkpoint (README "Ctrl-C"; train/stopping.py); ``shortrun.fit`` called from a worker thread
(where Python cannot install signal handlers) trains as it does in the main thread, bit for
bit, and leaves the process's handlers alone."""

from __future__ import annotations

import os
import signal
import threading

import pytest
import torch
from torch import nn

from shortrun.errors import TrainingInterrupted
from shortrun.models.ebm import EBM
from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.config import resolve
from shortrun.train.fit import fit
from shortrun.train.trainer import Trainer


def _signalling_at(trainer: Trainer, at_step: int, count: int, seen: list) -> None:
    """Send ``count`` SIGINTs to this process from inside training step ``at_step``."""
    original = trainer.model.training_step

    def step(batch, i, optimizers):
        out = original(batch, i, optimizers)
        seen.append(i + 1)
        if i + 1 == at_step:
            for _ in range(count):
                os.kill(os.getpid(), signal.SIGINT)
        return out

    trainer.model.training_step = step


def _trainer(tmp_path, overrides):
    return Trainer(resolve(None, [*overrides, "train.ckpt_every=4", "train.steps=12"]),
                   tmp_path / "run")


def test_one_ctrl_c_finishes_the_step_and_saves_it(tmp_path, tiny_ebm_overrides):
    trainer, seen = _trainer(tmp_path, tiny_ebm_overrides), []
    _signalling_at(trainer, 6, 1, seen)
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(TrainingInterrupted, match="interrupted at step 6; checkpoint saved"):
        trainer.fit()
    assert seen == [1, 2, 3, 4, 5, 6]
    assert load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["step"] == 6
    assert signal.getsignal(signal.SIGINT) is before


def test_a_second_ctrl_c_stops_at_once_and_keeps_the_last_good_checkpoint(
        tmp_path, tiny_ebm_overrides, capsys):
    trainer, seen = _trainer(tmp_path, tiny_ebm_overrides), []
    _signalling_at(trainer, 6, 2, seen)
    before = signal.getsignal(signal.SIGINT)
    path = tmp_path / "run" / "checkpoints" / "last.pt"
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    assert seen == [1, 2, 3, 4, 5, 6]  # no step after the second signal
    assert load_checkpoint(path)["step"] == 4  # the periodic one: nothing saved mid-step
    err = capsys.readouterr().err
    assert "stopped during step 6; nothing saved now, the last checkpoint (step 4) is intact" \
        in err
    assert signal.getsignal(signal.SIGINT) is before  # the handlers are restored


class Quadratic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * (self.scale * x * x).sum(-1)


def _fit_and_watch(run_dir, seen: dict) -> torch.Tensor:
    torch.manual_seed(0)
    model = EBM(Quadratic(), langevin_steps=3, buffer_size=64)
    original = model.training_step

    def step(batch, i, optimizers):
        seen.setdefault("handlers", set()).add(signal.getsignal(signal.SIGINT))
        return original(batch, i, optimizers)

    model.training_step = step
    x = torch.randn(64, 2, generator=torch.Generator().manual_seed(1))
    fit(model, x, steps=5, batch_size=16, run_dir=run_dir, progress=False,
        sample_every=1000, ckpt_every=1000)
    return model.energy.scale.detach().clone()


def test_fit_in_a_worker_thread_trains_bit_identically_and_installs_no_handler(tmp_path):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    threads = torch.get_num_threads()
    main_seen: dict = {}
    in_main = _fit_and_watch(tmp_path / "main", main_seen)
    # in the main thread the stop handler is in place during the steps ...
    assert main_seen["handlers"] != {before[0]}

    got: dict = {}

    def work():
        try:
            got["scale"] = _fit_and_watch(tmp_path / "thread", got)
        except BaseException as exc:  # reported below, not lost in the thread
            got["error"] = exc

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive()
    assert "error" not in got, repr(got.get("error"))
    # ... from a worker thread none is installed (Python allows it in the main thread only),
    # and the run is the same run
    assert got["handlers"] == {before[0]}
    assert torch.equal(got["scale"], in_main)
    assert not torch.equal(in_main, torch.ones(2))  # it trained
    assert (tmp_path / "thread" / "checkpoints" / "last.pt").is_file()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    assert torch.get_num_threads() == threads
