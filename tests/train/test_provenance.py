"""RUN_DIR/provenance.json: one entry per start and resume; config.yaml stays the config."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
import yaml

import shortrun
from shortrun.cli import main
from shortrun.hardware import cpu_model, cpu_signature
from shortrun.train.provenance import git_source, record_provenance


def train(capsys, *argv: str) -> None:
    code = main(list(argv))
    assert code == 0, capsys.readouterr().err


def test_start_and_resume_each_add_an_entry(tmp_path, tiny_ebm_overrides, capsys, monkeypatch):
    run = tmp_path / "run"
    sets = [a for o in tiny_ebm_overrides if not o.startswith("train.steps")
            for a in ("--set", o)]
    argv = ["train", "--out", str(run), "--set", "train.steps=8", *sets]
    monkeypatch.setattr(sys, "argv", ["shortrun", *argv])
    train(capsys, *argv)
    config_before = (run / "config.yaml").read_text()
    resume = ["train", "--resume", str(run), "--set", "train.steps=12"]
    monkeypatch.setattr(sys, "argv", ["shortrun", *resume])
    train(capsys, *resume)

    entries = json.loads((run / "provenance.json").read_text())
    assert [(e["event"], e["step"]) for e in entries] == [("start", 0), ("resume", 8)]
    first, second = entries
    assert first["argv"] == ["shortrun", *argv] and second["argv"] == ["shortrun", *resume]
    for e in entries:
        assert e["shortrun"] == shortrun.__version__
        assert e["torch"] == torch.__version__
        assert e["cpu"] == cpu_model() and e["cpu"]
        assert e["cpu_signature"] == cpu_signature()
        assert e["device"] == "cpu"
        assert {"git", "python", "platform", "time_utc", "cwd"} <= e.keys()
    # config.yaml holds the config alone and still rebuilds the run's config
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert "provenance" not in saved and "shortrun" not in saved
    assert yaml.safe_load(config_before)["model"] == saved["model"]
    code = main(["eval", str(run), "--metrics", "kl_grid"])
    assert code == 0, capsys.readouterr().err


def test_unreadable_provenance_is_kept_aside(tmp_path):
    (tmp_path / "provenance.json").write_text("{cut sho")
    with pytest.warns(UserWarning, match="unreadable"):
        record_provenance(tmp_path, step=5, resumed=True)
    assert (tmp_path / "provenance.json.unreadable").read_text() == "{cut sho"
    entries = json.loads((tmp_path / "provenance.json").read_text())
    assert len(entries) == 1 and entries[0]["event"] == "resume"


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                   check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_git_source_of_a_checkout(tmp_path):
    package = tmp_path / "src" / "shortrun"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "one")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert git_source(package) == {"commit": head, "dirty": False}
    (package / "__init__.py").write_text("x = 2\n")
    assert git_source(package) == {"commit": head, "dirty": True}


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_git_source_ignores_a_repository_that_merely_contains_the_package(tmp_path):
    # an install in site-packages under some other project's repository
    package = tmp_path / "venv" / "site-packages" / "shortrun"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    _git(tmp_path, "init", "-q")
    assert git_source(package) is None


def test_git_source_of_this_package():
    from pathlib import Path

    package = Path(shortrun.__file__).resolve().parent
    root = package.parent.parent
    found = git_source()
    if shutil.which("git") and (root / ".git").exists() and package == root / "src" / "shortrun":
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=True).stdout.strip()
        assert found is not None and found["commit"] == head
        assert isinstance(found["dirty"], bool)
    else:  # an installed copy: no commit to report
        assert found is None
