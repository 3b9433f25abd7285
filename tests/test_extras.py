"""Optional dependencies: each missing extra is named in one line, and training goes on
without the ones it only uses for by-products (TensorBoard events, 2-D pictures)."""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import pytest
import torch

from shortrun.cli import main
from shortrun.errors import MissingExtraError
from shortrun.extras import require


def hide(monkeypatch: pytest.MonkeyPatch, top: str) -> None:
    """Make ``import top`` (and every submodule) fail as if the package were not installed."""
    for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, top, None)


def test_require_returns_the_module_when_installed():
    assert require("json", "anything") is json


@pytest.mark.parametrize(("module", "needed_for", "message"), [
    ("scipy.io", "SVHN .mat files",
     "SVHN .mat files need SciPy: pip install 'shortrun[svhn]'"),
    ("tensorboard", "TensorBoard events",
     "TensorBoard events need TensorBoard: pip install 'shortrun[tensorboard]'"),
    ("matplotlib.pyplot", "2-D pictures",
     "2-D pictures need matplotlib: pip install 'shortrun[plots]'"),
])
def test_require_names_the_extra(monkeypatch, module, needed_for, message):
    hide(monkeypatch, module.split(".")[0])
    with pytest.raises(MissingExtraError) as err:
        require(module, needed_for)
    assert str(err.value) == message


def test_a_broken_dependency_of_an_extra_surfaces_as_itself(monkeypatch):
    import importlib

    def broken(name, *a, **k):
        raise ModuleNotFoundError("No module named 'google.protobuf'", name="google.protobuf")

    monkeypatch.setattr(importlib, "import_module", broken)
    with pytest.raises(ModuleNotFoundError, match="google.protobuf"):
        require("tensorboard", "TensorBoard events")


def test_svhn_without_scipy(monkeypatch, tmp_path):
    from shortrun.data.svhn import read_mat

    hide(monkeypatch, "scipy")
    with pytest.raises(MissingExtraError,
                       match=r"^SVHN \.mat files need SciPy: pip install 'shortrun\[svhn\]'$"):
        read_mat(tmp_path / "train_32x32.mat")


def test_svhn_train_without_scipy_is_one_line(monkeypatch, tmp_path, capsys):
    from scipy.io import savemat

    x = np.zeros((32, 32, 3, 4), dtype=np.uint8)
    for name in ("train_32x32.mat", "test_32x32.mat"):
        savemat(tmp_path / name, {"X": x, "y": np.ones((4, 1))})
    hide(monkeypatch, "scipy")
    monkeypatch.setenv("SHORTRUN_DATA", str(tmp_path))  # --data-dir would outlive the test
    code = main(["train", "lebm_svhn", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 1
    assert err == "shortrun: error: SVHN .mat files need SciPy: pip install 'shortrun[svhn]'\n"


def test_two_d_picture_without_matplotlib(monkeypatch, tmp_path):
    from shortrun.plotting import save_scatter_2d

    hide(monkeypatch, "matplotlib")
    with pytest.raises(MissingExtraError, match=r"^2-D pictures need matplotlib: "
                                                r"pip install 'shortrun\[plots\]'$"):
        save_scatter_2d(torch.zeros(3, 2), tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_image_grids_need_no_matplotlib(monkeypatch, tmp_path):
    from shortrun.data.base import DataInfo
    from shortrun.plotting import save_samples

    hide(monkeypatch, "matplotlib")
    info = DataInfo(shape=(1, 4, 4), kind="image", low=0.0, high=1.0)
    save_samples(torch.rand(4, 1, 4, 4), info, tmp_path / "grid.png")
    assert (tmp_path / "grid.png").stat().st_size > 0


@pytest.fixture
def bare_run(tmp_path, tiny_ebm_overrides, monkeypatch, capsys):
    """A tiny 2-D run trained with neither TensorBoard nor matplotlib installed."""
    hide(monkeypatch, "tensorboard")
    hide(monkeypatch, "matplotlib")
    sets = [a for o in tiny_ebm_overrides for a in ("--set", o)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["train", "--out", str(tmp_path / "run"), *sets])
    assert code == 0, capsys.readouterr().err
    return tmp_path / "run", [str(w.message) for w in caught]


def test_training_runs_without_tensorboard_or_matplotlib(bare_run):
    run, messages = bare_run
    tb = [m for m in messages if "shortrun[tensorboard]" in m]
    assert tb == ["TensorBoard events need TensorBoard: pip install 'shortrun[tensorboard]'; "
                  "training goes on without them (metrics.jsonl has every value)"]
    pictures = [m for m in messages if "shortrun[plots]" in m]
    assert pictures and all(m.endswith("training goes on without pictures") for m in pictures)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 12 and "loss" in rows[-1]
    assert (run / "checkpoints" / "last.pt").is_file()
    assert not (run / "tb").exists()
    assert not list((run / "samples").glob("*.png"))


def test_report_without_matplotlib_is_one_line(bare_run, monkeypatch, capsys):
    run, _ = bare_run
    hide(monkeypatch, "matplotlib")
    code = main(["report", str(run)])
    assert code == 1
    assert capsys.readouterr().err == ("shortrun: error: report curves need matplotlib: "
                                       "pip install 'shortrun[plots]'\n")
    assert not (run / "report").exists()
