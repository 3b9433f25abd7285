import os
import pickle

import pytest
import torch

from shortrun.errors import CheckpointError
from shortrun.train.checkpoint import load_checkpoint, save_checkpoint


def _state():
    return {"model_name": "ebm", "step": 3, "model": {"w": torch.arange(4.0)}}


def test_round_trip(tmp_path):
    save_checkpoint(_state(), tmp_path / "c.pt")
    state = load_checkpoint(tmp_path / "c.pt", "ebm")
    assert state["step"] == 3 and torch.equal(state["model"]["w"], torch.arange(4.0))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temp file left"


def test_missing(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "none.pt")


def test_truncated(tmp_path):
    save_checkpoint(_state(), tmp_path / "c.pt")
    data = (tmp_path / "c.pt").read_bytes()
    (tmp_path / "c.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or not a checkpoint"):
        load_checkpoint(tmp_path / "c.pt")


def test_not_a_checkpoint(tmp_path):
    (tmp_path / "c.pt").write_text("hello")
    with pytest.raises(CheckpointError, match="truncated or not a checkpoint"):
        load_checkpoint(tmp_path / "c.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "d.pt")
    with pytest.raises(CheckpointError, match="is not a shortrun checkpoint"):
        load_checkpoint(tmp_path / "d.pt")


def test_other_model(tmp_path):
    save_checkpoint(_state(), tmp_path / "c.pt")
    with pytest.raises(CheckpointError, match="holds a 'ebm' model, but the config asks for 'rbm'"):
        load_checkpoint(tmp_path / "c.pt", "rbm")


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


def test_code_running_pickle_is_refused_and_runs_nothing(tmp_path):
    target = tmp_path / "pwned"
    evil = _Evil()
    evil.target = target
    torch.save({"format": "shortrun-checkpoint", "x": evil}, tmp_path / "evil.pt",
               pickle_module=pickle)
    with pytest.raises(CheckpointError, match="was refused: it holds Python objects"):
        load_checkpoint(tmp_path / "evil.pt")
    assert not target.exists()
