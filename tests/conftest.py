"""Shared fixtures. Tests that need the real datasets read $SHORTRUN_DATA (CI sets it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

TINY_EBM = [
    "data.n_train=2000",
    "data.n_test=500",
    "train.steps=12",
    "train.batch_size=64",
    "train.log_every=4",
    "train.sample_every=1000",
    "train.ckpt_every=4",
    "train.progress=false",
    "model.buffer_size=256",
    "model.langevin_steps=4",
    "model.hidden=16",
    "sample.n=64",
    "sample.steps=5",
]


@pytest.fixture
def mkldnn_enabled():
    """Set ``torch.backends.mkldnn.enabled`` for one test and restore it afterwards."""
    before = torch._C._get_mkldnn_enabled()
    yield torch._C._set_mkldnn_enabled
    torch._C._set_mkldnn_enabled(before)


@pytest.fixture(autouse=True)
def _quiet_threads():
    torch.set_num_threads(1)
    yield


@pytest.fixture
def data_dir() -> Path:
    path = os.environ.get("SHORTRUN_DATA")
    if not path or not Path(path).is_dir():
        pytest.skip("SHORTRUN_DATA is not set to the shared data folder")
    return Path(path)


@pytest.fixture
def tiny_ebm_overrides() -> list[str]:
    return list(TINY_EBM)
