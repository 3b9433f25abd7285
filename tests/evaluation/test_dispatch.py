"""``shortrun eval``'s contract: every requested metric is checked before any work, each
finished metric group lands in eval.json at once (atomically), and nothing disturbs the
caller's random stream."""

from __future__ import annotations

import json

import pytest
import torch

from shortrun.cli import main
from shortrun.data.base import DataInfo, LoadedData
from shortrun.errors import ConfigError, DataError
from shortrun.evaluation import evaluate, evaluate_run
from shortrun.evaluation import features as eval_features
from shortrun.evaluation.dispatch import merge_eval_json, preflight
from shortrun.evaluation.plan import Group
from shortrun.models.registry import build_model
from shortrun.run import LoadedRun
from shortrun.train.config import resolve

MNIST_INFO = DataInfo((1, 28, 28), "image", -1.0, 1.0, 127.5, 127.5)
TINY_LEBM = ["model.nz=4", "model.ngf=2", "model.ndf=8", "model.prior_steps=2",
             "model.post_steps=2", "eval.n_samples=6", "eval.batch_size=4"]


def lebm_run(tmp_path, *overrides: str) -> tuple[LoadedRun, LoadedData, list[int]]:
    """An untrained tiny LEBM as a loaded run, with MNIST-shaped data in memory; the list
    records how many images each ``reconstruct`` call saw (the work behind ``mse``)."""
    torch.manual_seed(0)
    cfg = resolve("lebm_mnist", [*TINY_LEBM, *overrides])
    model = build_model(cfg, MNIST_INFO).eval()
    seen: list[int] = []
    reconstruct = model.reconstruct

    def counting(x, steps=None, generator=None):
        seen.append(len(x))
        return reconstruct(x, steps, generator)

    model.reconstruct = counting
    x = torch.rand(10, 1, 28, 28) * 2 - 1
    data = LoadedData(train=x, test=x[:8], info=MNIST_INFO)
    return LoadedRun(cfg, model, 3, tmp_path), data, seen


@pytest.fixture
def no_extractor(tmp_path, monkeypatch):
    """No FD extractor anywhere the default lookup searches."""
    monkeypatch.setenv("SHORTRUN_FEATURES", str(tmp_path / "features"))
    monkeypatch.setenv("SHORTRUN_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)


def pixel_extractor(spec, data_dir=None):
    return eval_features.Extractor("pixels", lambda x: x.flatten(1)[:, ::49], 16, MNIST_INFO)


def test_missing_extractor_fails_before_mse_is_computed(tmp_path, no_extractor):
    run, data, seen = lebm_run(tmp_path)
    with pytest.raises(DataError, match=r"feature extractor 'mnist' not found .*"
                                        r"`shortrun train classifier_mnist"):
        evaluate_run(run, ["mse", "fd"], data=data)
    assert seen == [] and not (tmp_path / "eval.json").exists()


def test_a_failure_after_mse_keeps_mse_in_eval_json(tmp_path, monkeypatch):
    run, data, seen = lebm_run(tmp_path)
    (tmp_path / "eval.json").write_text(json.dumps({"auprc": 0.5, "step": 1}))
    monkeypatch.setattr(eval_features, "load_extractor", pixel_extractor)

    def diverged(n, steps=None, generator=None):
        raise DataError("prior chain diverged")

    run.model.sample = diverged
    with pytest.raises(DataError, match="prior chain diverged"):
        evaluate_run(run, ["mse", "fd"], data=data)
    saved = json.loads((tmp_path / "eval.json").read_text())
    assert seen == [4, 4] and saved["step"] == 3 and saved["auprc"] == 0.5
    assert saved["mse"] > 0 and "fd" not in saved
    assert [p.name for p in tmp_path.iterdir()] == ["eval.json"]  # no temp file left


PROVENANCE = ["fd_extractor", "fd_extractor_sha256", "fd_reference", "fd_floor", "fd_floor_n",
              "fd_floor_real"]


def test_each_group_is_written_as_it_finishes(tmp_path, monkeypatch):
    run, data, _ = lebm_run(tmp_path)
    monkeypatch.setattr(eval_features, "load_extractor", pixel_extractor)
    snapshots = []
    write = merge_eval_json

    def spy(path, new, step):
        write(path, new, step)
        snapshots.append(sorted(json.loads(path.read_text())))

    monkeypatch.setattr("shortrun.evaluation.dispatch.merge_eval_json", spy)
    out = evaluate_run(run, ["mse", "fd"], data=data)
    fd_keys = ["fd", "fd_n", "fd_n_ref", *PROVENANCE]
    assert list(out) == ["mse", *fd_keys]
    assert snapshots == [["mse", "step"], sorted([*fd_keys, "mse", "step"])]


def test_all_missing_things_are_named_in_one_line(tmp_path, no_extractor):
    run, data, seen = lebm_run(tmp_path)
    no_test = LoadedData(train=data.train, info=MNIST_INFO)
    with pytest.raises(ConfigError) as err:
        evaluate(run.cfg, run.model, ["mse", "auprc", "fd"], data=no_test)
    message = str(err.value)
    assert "\n" not in message and seen == []
    assert "no test split to reconstruct" in message
    assert "needs a model trained with data.anomaly_digit" in message
    assert "shortrun train classifier_mnist" in message


def test_checks_do_not_move_the_metrics_random_stream():
    def loads_something() -> None:
        torch.randn(1000)  # e.g. building the extractor's network

    torch.manual_seed(7)
    preflight([Group("g", lambda done: {}, (loads_something,))])
    after = torch.rand(3)
    torch.manual_seed(7)
    torch.testing.assert_close(after, torch.rand(3))


def test_evaluate_is_seeded_by_eval_seed_and_leaves_the_caller_stream(tmp_path):
    run, data, _ = lebm_run(tmp_path)
    torch.manual_seed(123)
    first = evaluate(run.cfg, run.model, ["mse"], data=data)
    mine = torch.rand(2)
    torch.manual_seed(999)
    assert evaluate(run.cfg, run.model, ["mse"], data=data) == first
    torch.manual_seed(123)
    torch.testing.assert_close(mine, torch.rand(2))


def test_merge_keeps_earlier_keys_and_leaves_the_file_whole_on_failure(tmp_path):
    path = tmp_path / "eval.json"
    merge_eval_json(path, {"a": 1.0}, 5)
    merge_eval_json(path, {"b": "x"}, 6)
    assert json.loads(path.read_text()) == {"a": 1.0, "b": "x", "step": 6}
    before = path.read_text()
    with pytest.raises(TypeError):
        merge_eval_json(path, {"c": object()}, 7)
    assert path.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["eval.json"]


def test_cli_refuses_an_impossible_metric_before_sampling(tmp_path, tiny_ebm_overrides, capsys):
    run = tmp_path / "rings"
    sets = [a for o in [*tiny_ebm_overrides, "data.name=rings"] for a in ("--set", o)]
    assert main(["train", "--out", str(run), *sets]) == 0
    capsys.readouterr()
    assert main(["eval", str(run), "--metrics", "mmd,kl_grid"]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0
    assert "kl_grid needs a closed-form data density" in err and "--metrics mmd" in err
    assert not (run / "eval.json").exists() and not (run / "density.png").exists()


def test_cli_keeps_finished_groups_when_a_later_one_fails(tmp_path, tiny_ebm_overrides,
                                                          capsys, monkeypatch):
    run = tmp_path / "run"
    sets = [a for o in tiny_ebm_overrides for a in ("--set", o)]
    assert main(["train", "--out", str(run), *sets]) == 0

    def broken(*args, **kwargs):
        raise DataError("mmd: reference set unreadable")

    monkeypatch.setattr("shortrun.evaluation.density.mmd2", broken)
    capsys.readouterr()
    assert main(["eval", str(run), "--metrics", "kl_grid,mmd"]) == 1
    assert capsys.readouterr().err.strip() == "shortrun: error: mmd: reference set unreadable"
    saved = json.loads((run / "eval.json").read_text())
    assert saved["kl_grid"] > 0 and saved["step"] == 12 and "mmd" not in saved


def test_the_eval_table_summarises_a_reliability_table_in_one_short_line():
    """JEM's ``reliability`` (three lists of 15) is one short line in the table; numbers keep
    6 digits; another long value is named by its size. eval.json is not involved."""
    from shortrun.evaluation.dispatch import table_lines

    table = {"confidence": [0.0] * 14 + [0.97], "accuracy": [0.0] * 14 + [0.9],
             "count": [0] * 14 + [10]}
    lines = table_lines({"ece": 0.0712345678, "ece_bins": 15, "reliability": table,
                         "per_class": list(range(40))})
    assert lines[0].split() == ["metric", "value"]
    assert lines[1].split() == ["ece", "0.0712346"] and lines[2].split() == ["ece_bins", "15"]
    assert lines[3].split(None, 1) == ["reliability", "15 bins, 1 filled: 1 over-, 0 "
                                       "under-confident; max gap 0.07 at confidence 0.97 "
                                       "(see shortrun report)"]
    assert lines[4].split(None, 1) == ["per_class", "40 values; see eval.json"]
    assert len(lines[3].split(None, 1)[1]) <= 110  # not the 900 characters of the table
