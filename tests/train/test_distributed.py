"""torchrun with the gloo backend on CPU: 2 processes, then resume in 1."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from shortrun.errors import ConfigError
from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.distributed import DistInfo, check_world
from shortrun.train.rundir import read_config
from shortrun.train.trainer import Trainer

TORCHRUN = Path(sys.executable).with_name("torchrun")


def torchrun(run_dir, recipe, sets, nproc=2):
    if not TORCHRUN.exists():
        pytest.skip("torchrun is not installed beside this Python")
    args = [str(TORCHRUN), "--standalone", f"--nproc_per_node={nproc}", "-m", "shortrun",
            "train", recipe, "--out", str(run_dir)]
    for s in ["train.progress=false", *sets]:
        args += ["--set", s]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


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
