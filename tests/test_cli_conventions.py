"""`shortrun --version` and `shortrun config`: the conventions users look for."""

from __future__ import annotations

import platform
import re

import pytest
import torch
import yaml

import shortrun
from shortrun.cli import main
from shortrun.train.config import resolve


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def lines_of(out: str, key: str) -> list[str]:
    """The line that starts ``key`` and the doc line beneath it, if any."""
    lines = out.splitlines()
    i = next(i for i, line in enumerate(lines) if line.split()[:1] == [key])
    return lines[i: i + 2]


def test_version_names_shortrun_and_torch(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"shortrun {shortrun.__version__} from ")
    assert f"torch {torch.__version__}" in out
    assert f"Python {platform.python_version()}" in out
    assert len(out.splitlines()) == 1


def test_config_shows_type_bounds_value_default_and_doc(capsys):
    code, out, err = run(capsys, "config", "ebm_8gaussians")
    assert code == 0, err
    assert out.startswith("# ebm_8gaussians: ")
    lr = lines_of(out, "train.lr")[0]  # the recipe sets 2e-3; the dataclass says 1e-3
    assert re.fullmatch(r"\s+train\.lr\s+float, > 0\s+= 0\.002\s+\(default 0\.001\)", lr)
    hidden, doc = lines_of(out, "model.hidden")  # a model key with bounds and a doc string
    assert re.fullmatch(r"\s+model\.hidden\s+int, > 0\s+= 128", hidden)
    assert doc.strip() == "MLP width"
    precision, doc = lines_of(out, "train.precision")  # a choices key
    assert re.fullmatch(r"\s+train\.precision\s+str, one of fp32, bf16\s+= fp32", precision)
    assert doc.strip() == "bf16: training steps run under torch.autocast(bfloat16)"
    reinit = lines_of(out, "model.reinit")[0]
    assert re.fullmatch(r"\s+model\.reinit\s+float, >= 0, <= 1\s+= 0\.05", reinit)
    steps = lines_of(out, "train.steps")[0]
    assert re.fullmatch(r"\s+train\.steps\s+int \| None, > 0\s+= 2000\s+\(default null\)",
                        steps)


def test_config_with_overrides_shows_the_overridden_value(capsys):
    code, out, _ = run(capsys, "config", "rbm_digits", "--set", "train.lr=0.05",
                       "--set", "model.n_hidden=7")
    assert code == 0
    assert re.search(r"train\.lr\s+float, > 0\s+= 0\.05\s+\(default 0\.001\)", out)
    assert re.search(r"model\.n_hidden\s+int, > 0\s+= 7", out)


def test_config_yaml_is_a_recipe_that_gives_the_same_config(capsys, tmp_path):
    code, out, _ = run(capsys, "config", "lebm_mnist", "--set", "train.lr=3e-4",
                       "--format", "yaml")
    assert code == 0
    raw = yaml.safe_load(out)
    assert raw["train"]["lr"] == 3e-4 and raw["recipe"] == "lebm_mnist"
    path = tmp_path / "again.yaml"
    path.write_text(out)
    again, original = resolve(str(path)), resolve("lebm_mnist", ["train.lr=3e-4"])
    for section in ("data", "model", "train", "sample", "eval"):
        assert getattr(again, section) == getattr(original, section), section


@pytest.mark.parametrize(("argv", "message"), [
    (["config", "no_such_recipe"], "unknown recipe 'no_such_recipe'"),
    (["config", "ebm_8gaussians", "--set", "model.hiden=3"], "Did you mean model.hidden?"),
    (["config", "ebm_8gaussians", "--set", "train.lr=-1"], "train.lr: must be > 0; got -1.0"),
    (["config", "--format", "xml"], "invalid choice: 'xml'"),
])
def test_config_errors_are_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("shortrun: error: ") and err.count("\n") == 1
    assert message in err
