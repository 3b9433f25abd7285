"""torchrun with the gloo backend on CPU: 2 processes, then resume in 1."""

import json

import pytest
import torch
import torch.distributed
from dist_helper import torchrun
from torch import nn

from shortrun.errors import ConfigError
from shortrun.models.base import Model
from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.distributed import DistInfo, average_gradients_before_step, check_world
from shortrun.train.rundir import read_config
from shortrun.train.trainer import Trainer


def test_two_process_ebm_then_single_process_resume(tmp_path, tiny_ebm_overrides):
    run = tmp_path / "run"
    torchrun(run, "ebm_8gaussians", [*tiny_ebm_overrides, "model.chain=persistent",
                                     "model.n_chains=128", "train.steps=8"])
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["params_identical_across_ranks"] == 1.0 and rows[-1]["world_size"] == 2
    state = load_checkpoint(run / "checkpoints" / "last.pt", "ebm")
    assert state["world_size"] == 2 and len(state["shards"]) == 2
    chains = [s["buffers"]["source.chains"] for s in state["shards"]]
    assert not torch.equal(chains[0], chains[1]), "ranks must run distinct chains"
    result = Trainer(read_config(run, ["train.steps=11"]), run, resume=True).fit()
    assert result.step == 11


def test_changed_world_size_is_refused_with_a_message():
    with pytest.raises(ConfigError, match="written by 2 process.*--nproc_per_node=2"):
        check_world(2, DistInfo(rank=0, world=4))
    check_world(2, DistInfo())  # a single process may resume it


def test_gradient_clipping_sees_the_rank_averaged_gradient(tmp_path):
    """``Model.optimizer_step`` averages over the ranks before it clips (as DDP would), and the
    step hook then does not average a second time.

    A one-process gloo group with ``world=2`` given to the hook acts like a second rank whose
    gradient is zero, so the average halves the gradient and the order becomes visible."""
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}",
                                         rank=0, world_size=1)
    try:
        model = Model()
        model.grad_clip = 6.0
        model.w = nn.Parameter(torch.zeros(2))
        opt = torch.optim.SGD([model.w], lr=1.0)
        average_gradients_before_step(opt, world=2)
        target = torch.tensor([6.0, 8.0])  # the gradient is -target, norm 10
        norm = model.optimizer_step(opt, -(model.w * target).sum())
        # averaged (norm 5, under the clip of 6) then applied once; clipping first would
        # give [1.8, 2.4], averaging twice [1.5, 2.0]
        assert norm == pytest.approx(5.0)
        assert torch.allclose(model.w.detach(), torch.tensor([3.0, 4.0]))
        model.grad_clip = None  # without a clip the step hook averages
        model.optimizer_step(opt, -(model.w * target).sum())
        assert torch.allclose(model.w.detach(), torch.tensor([6.0, 8.0]))
    finally:
        torch.distributed.destroy_process_group()


def test_shutdown_leaves_once_the_sentinel_collective_is_released(tmp_path, monkeypatch):
    """:func:`shortrun.train.distributed.shutdown` all-reduces a sentinel as the last
    collective and destroys the group only after the worker thread has released it (the
    guard against the rank aborting at exit; see its docstring)."""
    from shortrun.train import distributed

    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}",
                                         rank=0, world_size=1)
    reduced: list[torch.Tensor] = []
    real_all_reduce = torch.distributed.all_reduce

    def all_reduce(tensor, *args, **kwargs):
        reduced.append(tensor.clone())
        return real_all_reduce(tensor, *args, **kwargs)

    monkeypatch.setattr(distributed.dist, "all_reduce", all_reduce)
    try:
        distributed.shutdown(DistInfo(rank=0, world=2))
        assert not torch.distributed.is_initialized()
        assert len(reduced) == 1 and reduced[0].shape == (1,)
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
