"""The command-line contract: names, outputs, exit codes and one-line errors."""

import json

import numpy as np
import pytest
import yaml

from shortrun.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_recipes_lists_one_line_each(capsys):
    code, out, _ = run(capsys, "recipes")
    assert code == 0
    lines = out.strip().splitlines()
    assert any(line.startswith("ebm_8gaussians ") and "(default)" in line for line in lines)


@pytest.fixture
def trained(tmp_path, tiny_ebm_overrides, capsys):
    sets = [a for o in tiny_ebm_overrides for a in ("--set", o)]
    code, out, err = run(capsys, "train", "--out", str(tmp_path / "run"), *sets)
    assert code == 0, err
    return tmp_path / "run"


def test_train_leaves_a_complete_run_directory(trained):
    for name in ("config.yaml", "metrics.jsonl", "checkpoints/last.pt"):
        assert (trained / name).is_file(), name
    assert list((trained / "samples").glob("step_*.png"))
    assert list((trained / "tb").glob("events.out.tfevents.*"))
    cfg = yaml.safe_load((trained / "config.yaml").read_text())
    assert cfg["recipe"] == "ebm_8gaussians" and cfg["train"]["steps"] == 12
    rows = [json.loads(line) for line in (trained / "metrics.jsonl").read_text().splitlines()]
    assert {"loss", "energy_pos", "energy_neg", "energy_gap"} <= rows[-1].keys()


def test_sample_npz_and_png(trained, capsys, tmp_path):
    code, _, err = run(capsys, "sample", str(trained), "--n", "37", "--out",
                       str(tmp_path / "s.npz"))
    assert code == 0, err
    x = np.load(tmp_path / "s.npz")["x"]
    assert x.shape == (37, 2) and np.isfinite(x).all()
    code, _, _ = run(capsys, "sample", str(trained), "--n", "10", "--out", str(tmp_path / "s.png"))
    assert code == 0 and (tmp_path / "s.png").stat().st_size > 0


def test_eval_writes_json_and_table(trained, capsys):
    code, out, err = run(capsys, "eval", str(trained), "--metrics", "kl_grid")
    assert code == 0, err
    result = json.loads((trained / "eval.json").read_text())
    assert result["kl_grid"] > 0 and result["step"] == 12
    assert "kl_grid" in out


def test_eval_unknown_metric(trained, capsys):
    code, _, err = run(capsys, "eval", str(trained), "--metrics", "fid")
    assert code == 2
    assert "--metrics: fid not available for model 'ebm'; available: kl_grid" in err


def test_existing_run_is_never_overwritten(trained, capsys):
    before = (trained / "checkpoints" / "last.pt").read_bytes()
    code, _, err = run(capsys, "train", "--out", str(trained))
    assert code == 2 and "already holds a run; continue it with --resume" in err
    assert (trained / "checkpoints" / "last.pt").read_bytes() == before


def test_bad_override_exits_2_with_one_line(capsys, tmp_path):
    code, _, err = run(capsys, "train", "--out", str(tmp_path / "r"), "--set",
                       "train.batch_size=0")
    assert code == 2
    assert err.strip() == "shortrun: error: train.batch_size: must be > 0; got 0"
    assert not (tmp_path / "r").exists()


def test_bad_arguments(capsys, tmp_path):
    code, _, err = run(capsys, "sample", str(tmp_path), "--n", "5")
    assert code == 2 and "is not a run directory (no config.yaml)" in err
    code, _, err = run(capsys, "train", "--nope")
    assert code == 2 and "unrecognized arguments: --nope" in err
    code, _, err = run(capsys, "train", "ebm_8gaussians", "--resume", str(tmp_path))
    assert code == 2 and "not both" in err


def test_bad_sample_arguments(trained, capsys, tmp_path):
    code, _, err = run(capsys, "sample", str(trained), "--n", "0")
    assert code == 2 and "--n must be a positive integer" in err
    code, _, err = run(capsys, "sample", str(trained), "--out", str(tmp_path / "x.jpg"))
    assert code == 2 and "must end in .npz or .png" in err


def test_corrupt_checkpoint_is_one_line(trained, capsys):
    ckpt = trained / "checkpoints" / "last.pt"
    ckpt.write_bytes(ckpt.read_bytes()[:100])
    code, _, err = run(capsys, "sample", str(trained))
    assert code == 1 and "truncated or not a checkpoint" in err and "Traceback" not in err


def test_sample_out_never_overwrites_without_force(trained, capsys, tmp_path):
    out = tmp_path / "mine.npz"
    out.write_bytes(b"precious")
    code, _, err = run(capsys, "sample", str(trained), "--n", "5", "--out", str(out))
    assert code == 2 and err.count("\n") == 1
    assert f"--out {out}: that file already exists; pass --force" in err
    assert out.read_bytes() == b"precious"
    code, _, err = run(capsys, "sample", str(trained), "--n", "5", "--out", str(out), "--force")
    assert code == 0, err
    assert np.load(out)["x"].shape == (5, 2)


def test_sample_out_naming_a_folder_is_one_line(trained, capsys, tmp_path):
    code, _, err = run(capsys, "sample", str(trained), "--out", str(tmp_path))
    assert code == 2 and "is a folder; give a file name in it" in err


def test_report_out_never_overwrites_a_folder_with_files_without_force(trained, capsys,
                                                                       tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    (out / "index.html").write_text("mine")
    code, _, err = run(capsys, "report", str(trained), "--out", str(out))
    assert code == 2 and err.count("\n") == 1
    assert f"--out {out}: that folder already exists; pass --force" in err
    assert (out / "index.html").read_text() == "mine"
    code, _, err = run(capsys, "report", str(trained), "--out", str(out), "--force")
    assert code == 0, err
    assert (out / "index.html").read_text() != "mine"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(capsys, "report", str(trained), "--out", str(empty))[0] == 0


def test_report_out_naming_a_file_is_one_line(trained, capsys, tmp_path):
    path = tmp_path / "page.html"
    path.write_text("mine")
    code, _, err = run(capsys, "report", str(trained), "--out", str(path), "--force")
    assert code == 2 and "is a file; report --out names a folder" in err
    assert path.read_text() == "mine"
