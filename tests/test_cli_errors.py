"""Bad input is one line on stderr and an exit code, never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from shortrun.cli import main

MNIST_TINY = ["data.n_train=64", "train.steps=1", "train.batch_size=16",
              "train.progress=false"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> bool:
    return err.count("\n") == 1 and "Traceback" not in err


def _sets(overrides):
    return [a for o in overrides for a in ("--set", o)]


@pytest.fixture
def mnist_dir(tmp_path, monkeypatch):
    """A data folder for one test; ``--data-dir`` sets $SHORTRUN_DATA in this process, so the
    variable is restored afterwards."""
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("SHORTRUN_DATA", str(folder))
    return folder


def _write_mnist(folder: Path, **arrays) -> Path:
    np.savez(folder / "mnist.npz", **arrays)
    return folder


def test_truncated_mnist_npz(tmp_path, capsys, mnist_dir):
    rng = np.random.default_rng(0)
    folder = _write_mnist(mnist_dir,
                          x_train=rng.integers(0, 255, (64, 28, 28), dtype=np.uint8),
                          y_train=np.zeros(64, np.uint8), x_test=np.zeros((32, 28, 28), np.uint8),
                          y_test=np.zeros(32, np.uint8))
    path = folder / "mnist.npz"
    path.write_bytes(path.read_bytes()[:5000])
    code, _, err = run(capsys, "train", "lebm_mnist", "--out", str(tmp_path / "run"),
                       "--data-dir", str(folder), *_sets(MNIST_TINY))
    assert code == 1 and one_line(err), err
    assert f"{path} is truncated or not an .npz file (BadZipFile" in err
    assert "get a fresh copy" in err


def test_npz_without_x_test(tmp_path, capsys, mnist_dir):
    folder = _write_mnist(mnist_dir, x_train=np.zeros((64, 28, 28), np.uint8),
                          y_train=np.zeros(64, np.uint8), y_test=np.zeros(32, np.uint8))
    code, _, err = run(capsys, "train", "lebm_mnist", "--out", str(tmp_path / "run"),
                       "--data-dir", str(folder), *_sets(MNIST_TINY))
    assert code == 1 and one_line(err), err
    assert f"{folder / 'mnist.npz'} has no array 'x_test'" in err
    assert "it holds x_train, y_train, y_test" in err


def test_out_naming_a_file(tmp_path, capsys, tiny_ebm_overrides):
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    code, _, err = run(capsys, "train", "--out", str(target), *_sets(tiny_ebm_overrides))
    assert code == 2 and one_line(err), err
    assert f"--out {target}: cannot create the run directory (Not a directory" in err
    assert target.read_text() == "mine"


def test_unwritable_out(tmp_path, capsys, tiny_ebm_overrides, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    if os.geteuid() == 0:  # root writes anywhere: make mkdir fail as it would for a user
        real_mkdir = Path.mkdir

        def mkdir(self, *args, **kwargs):
            if locked in self.parents:
                raise PermissionError(13, "Permission denied", str(self))
            return real_mkdir(self, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", mkdir)
    else:
        locked.chmod(0o500)
    try:
        code, _, err = run(capsys, "train", "--out", str(locked / "run"),
                           *_sets(tiny_ebm_overrides))
    finally:
        locked.chmod(0o700)
    assert code == 2 and one_line(err), err
    assert f"--out {locked / 'run'}: cannot create the run directory (Permission denied" in err
    assert "choose a folder you can write to" in err


def test_sample_to_an_unwritable_place_is_one_line(tmp_path, capsys, tiny_ebm_overrides):
    run_dir = tmp_path / "run"
    assert main(["train", "--out", str(run_dir), *_sets(tiny_ebm_overrides)]) == 0
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run(capsys, "sample", str(run_dir), "--n", "4", "--out",
                       str(blocker / "s.npz"))
    assert code == 1 and one_line(err), err
    assert str(blocker) in err and "check the path and its permissions" in err


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_cpu_build(tmp_path, capsys, tiny_ebm_overrides):
    code, _, err = run(capsys, "train", "--out", str(tmp_path / "run"),
                       *_sets([*tiny_ebm_overrides, "train.device=cuda"]))
    assert code == 2 and one_line(err), err
    assert "train.device=cuda: " in err and "use train.device=cpu" in err
    assert not (tmp_path / "run").exists()


def test_unknown_device_name(tmp_path, capsys, tiny_ebm_overrides):
    code, _, err = run(capsys, "train", "--out", str(tmp_path / "run"),
                       *_sets([*tiny_ebm_overrides, "train.device=gpu"]))
    assert code == 2 and one_line(err), err
    assert "train.device='gpu' is not a device; use cpu, cuda, cuda:N or mps" in err


def test_bf16_on_a_cpu_without_native_bf16(tmp_path, capsys, tiny_ebm_overrides, monkeypatch):
    from shortrun import hardware

    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2", "avx512f"}))
    code, _, err = run(capsys, "train", "--out", str(tmp_path / "run"),
                       *_sets([*tiny_ebm_overrides, "train.precision=bf16"]))
    assert code == 2 and one_line(err), err
    assert "train.precision=bf16 needs the CPU's AVX512-BF16 or AMX-BF16" in err
    assert err.rstrip().endswith("use train.precision=fp32")
    assert not (tmp_path / "run").exists()
