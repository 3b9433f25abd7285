"""CI refuses a missing or incomplete data folder instead of skipping the data tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_ci(data: Path) -> subprocess.CompletedProcess:
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    return subprocess.run(["bash", str(ROOT / ".ci" / "run")], capture_output=True, text=True,
                          env={**os.environ, "SHORTRUN_DATA": str(data)}, timeout=60)


def test_ci_fails_on_a_missing_data_folder(tmp_path):
    done = run_ci(tmp_path / "nowhere")
    assert done.returncode == 1
    assert "is not a folder" in done.stderr and str(tmp_path / "nowhere") in done.stderr


def test_ci_fails_on_an_incomplete_data_folder_and_names_the_missing_files(tmp_path):
    (tmp_path / "mnist.npz").write_bytes(b"x")
    done = run_ci(tmp_path)
    assert done.returncode == 1
    assert "incomplete" in done.stderr and "ptb/ptb.train.txt" in done.stderr
    named = done.stderr.split("missing or empty")[1].split("(")[0].split()
    assert "mnist.npz" not in named and "binarized_mnist.npz" in named


def test_pytest_stops_instead_of_skipping_when_shortrun_data_names_a_missing_folder(tmp_path):
    env = {**os.environ, "SHORTRUN_DATA": str(tmp_path / "nowhere")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--co", "-p", "no:cacheprovider",
                           str(ROOT / "tests" / "test_ci.py")], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert done.returncode != 0
    assert f"SHORTRUN_DATA={tmp_path / 'nowhere'} is not a folder" in done.stdout + done.stderr
