"""Shared fixtures. Tests that need the real datasets read $SHORTRUN_DATA (CI sets it).

Unset, those tests skip (the skip report, ``pytest -rs``, lists them). Set to a folder that is
missing or lacks a file in tests/shared_data_files.txt, the session stops before collecting:
a typo in CI must fail, not turn the data tests into silent skips.
"""

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


DATA_FILES = Path(__file__).with_name("shared_data_files.txt")


def required_data_files() -> list[str]:
    lines = (line.strip() for line in DATA_FILES.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def data_problem(path: str) -> str | None:
    """Why ``$SHORTRUN_DATA=path`` cannot serve the data tests, or None."""
    root = Path(path)
    if not root.is_dir():
        return f"SHORTRUN_DATA={path} is not a folder"
    missing = [n for n in required_data_files()
               if not (root / n).is_file() or (root / n).stat().st_size == 0]
    if missing:
        return f"SHORTRUN_DATA={path} is incomplete: missing or empty {', '.join(missing)}"
    return None


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get("SHORTRUN_DATA")
    if path:
        problem = data_problem(path)
        if problem is not None:
            raise pytest.UsageError(f"{problem}; copy the shared datasets there (list: "
                                    f"{DATA_FILES.name}) or unset SHORTRUN_DATA to skip the "
                                    "tests that need them")


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


@pytest.fixture(autouse=True)
def _pinned_routes(tmp_path_factory, monkeypatch):
    """Results must not depend on timing: every test runs each family on its fixed route (the
    route taken before routes were measured; ``torch`` is the ``rbm_step`` family's, and names
    no route of the others, so they take theirs) and the LEBM generator in NHWC, and a
    measuring test writes its route cache under a temporary folder, never the user's
    ~/.cache."""
    from shortrun.speed import engine as routes

    monkeypatch.setenv("SHORTRUN_ROUTE", "torch")
    monkeypatch.setenv("SHORTRUN_ROUTE_CONV", "nhwc")  # the LEBM generator's old default
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    routes.forget()
    yield
    routes.forget()


@pytest.fixture
def data_dir() -> Path:
    path = os.environ.get("SHORTRUN_DATA")
    if not path:  # set-but-missing already stopped the session in pytest_configure
        pytest.skip("SHORTRUN_DATA is not set to the shared data folder")
    return Path(path)


@pytest.fixture
def tiny_ebm_overrides() -> list[str]:
    return list(TINY_EBM)
