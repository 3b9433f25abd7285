"""``shortrun sample RUN --class Y [--guidance W] [--classifier RUN]`` on tiny trained runs of
the scikit-learn digits (no downloads): the flags reach the model's ``sample(n, y=,
guidance=, classifier=)``, and every misuse is one line naming the fix (issue 45)."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import yaml

from shortrun.cli import main
from shortrun.models.ebm import EBM
from shortrun.models.jem import JEM

TRAIN = {"steps": 2, "batch_size": 16, "progress": False, "sample_every": 1000,
         "ckpt_every": 1000, "log_every": 1, "threads": 1}
RECIPES = {
    "jem": {"model": {"name": "jem", "n_classes": 10, "width": 4, "buffer_size": 32,
                      "langevin_steps": 2, "sample_from": "noise"},
            "eval": {"metrics": ["accuracy", "ece"]}},
    "ebm": {"model": {"name": "ebm", "energy": "mlp", "hidden": 8, "depth": 1,
                      "chain": "noise", "langevin_steps": 2}},
    "rbm": {"model": {"name": "rbm", "n_hidden": 4}, "data": {"name": "digits",
                                                              "binarize": True}},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("class_runs")
    out = {}
    for name, parts in RECIPES.items():
        recipe = {"description": f"tiny {name}", "data": {"name": "digits"}, "train": TRAIN,
                  "sample": {"n": 6, "steps": 2}, **parts}
        path = root / f"{name}.yaml"
        path.write_text(yaml.safe_dump(recipe))
        assert main(["train", str(path), "--out", str(root / name)]) == 0
        out[name] = root / name
    return out


@pytest.fixture
def calls(monkeypatch):
    """The keywords every ``sample`` call of JEM and EBM received."""
    seen: list[dict] = []
    for cls in (JEM, EBM):
        original = cls.sample

        @functools.wraps(original)  # the same signature: the CLI reads it
        def spy(self, n, *args, _original=original, **kwargs):
            seen.append(kwargs)
            return _original(self, n, *args, **kwargs)

        monkeypatch.setattr(cls, "sample", spy)
    return seen


def sample(capsys, *argv):
    code = main(["sample", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_jem_class_and_guidance_reach_its_sample(runs, calls, capsys, tmp_path):
    code, out, err = sample(capsys, runs["jem"], "--class", 3, "--guidance", 2.5, "--n", 5,
                            "--out", tmp_path / "s.npz")
    assert code == 0, err
    assert "5 samples of class 3" in out
    assert calls and all(c == {"y": 3, "guidance": 2.5} for c in calls)
    x = np.load(tmp_path / "s.npz")["x"]
    assert x.shape == (5, 1, 8, 8) and np.isfinite(x).all()
    calls.clear()
    assert sample(capsys, runs["jem"], "--class", 0, "--out", tmp_path / "s.png")[0] == 0
    assert calls and all(c == {"y": 0} for c in calls)  # guidance: the run's model.guidance


def test_ebm_class_uses_the_classifier_run(runs, calls, capsys, tmp_path):
    code, _, err = sample(capsys, runs["ebm"], "--class", 7, "--classifier", runs["jem"],
                          "--n", 4, "--out", tmp_path / "e.npz")
    assert code == 0, err
    ebm_calls = [c for c in calls if "classifier" in c]
    assert ebm_calls and all(c["y"] == 7 and isinstance(c["classifier"], JEM)
                             for c in ebm_calls)
    assert np.load(tmp_path / "e.npz")["x"].shape == (4, 1, 8, 8)


def test_unconditional_sampling_passes_no_class(runs, calls, capsys, tmp_path):
    assert sample(capsys, runs["jem"], "--n", 3, "--out", tmp_path / "u.npz")[0] == 0
    assert calls and all(c == {} for c in calls)


@pytest.mark.parametrize("run, args, message", [
    ("rbm", ["--class", "1"], r"\(model rbm\) has no classes; class-conditional samples come "
                              r"from a jem run, or an ebm run with --classifier RUN; drop "
                              r"--class"),
    ("ebm", ["--class", "1"], r"has no classes of its own; add --classifier RUN"),
    ("ebm", ["--class", "1", "--classifier", "@rbm"], r"gives no class probabilities; use a "
                                                      r"classifier or jem run"),
    ("jem", ["--class", "1", "--classifier", "@jem"], r"is its own classifier; drop "
                                                      r"--classifier"),
    ("jem", ["--class", "10"], r"--class 10: the classes are 0\.\.9"),
    ("jem", ["--class", "-1"], r"--class -1: the classes are 0\.\.9"),
    ("jem", ["--class", "1", "--guidance", "-0.5"], r"--guidance -0\.5: must be >= 0"),
    ("jem", ["--guidance", "1"], r"--guidance steers class-conditional samples: add --class Y"),
    ("ebm", ["--classifier", "@jem"], r"--classifier steers class-conditional samples"),
])
def test_misuse_is_one_line_naming_the_fix(runs, capsys, tmp_path, run, args, message):
    import re

    args = [str(runs[a[1:]]) if a.startswith("@") else a for a in args]
    code, _, err = sample(capsys, runs[run], *args, "--out", tmp_path / "x.npz")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert re.search(message, err), err
    assert not (tmp_path / "x.npz").exists()


def test_a_classifier_of_other_data_is_refused(runs, capsys, tmp_path, monkeypatch):
    """A classifier run whose data has another range than the ebm's ([0, 1] against [-1, 1])."""
    import dataclasses

    import shortrun.run

    real = shortrun.run.load_run

    def load_run(run_dir, overrides=None):
        run = real(run_dir, overrides)
        if run_dir == runs["jem"]:
            run.model.info = dataclasses.replace(run.model.info, low=0.0, high=1.0)
        return run

    monkeypatch.setattr(shortrun.run, "load_run", load_run)
    code, _, err = sample(capsys, runs["ebm"], "--class", 2, "--classifier", runs["jem"],
                          "--out", tmp_path / "x.npz")
    assert code == 2 and "in [0.0, 1.0]" in err and "in [-1.0, 1.0]" in err, err
    assert "use a classifier trained on the same data" in err


def test_eval_prints_the_reliability_table_as_one_line(runs, capsys):
    assert main(["eval", str(runs["jem"])]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith("reliability"))
    value = line.split(None, 1)[1]
    assert value.startswith("15 bins, ") and value.endswith("(see shortrun report)")
    assert len(value) <= 110  # not the 900 characters of the whole table
    saved = json.loads((runs["jem"] / "eval.json").read_text())
    assert len(saved["reliability"]["count"]) == 15  # eval.json keeps the whole table
