"""Feature extractors: a classifier run as extractor, range conversion, FD/KID, clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shortrun.data.base import DataInfo
from shortrun.data.registry import load_data
from shortrun.errors import ConfigError, DataError
from shortrun.metrics.features import (
    default_extractor_spec,
    fd_kid,
    load_extractor,
    model_fd_kid,
)
from shortrun.train.config import build_config
from shortrun.train.trainer import Trainer

TINY_CLASSIFIER = {
    "data": {"name": "digits"},
    "model": {"name": "classifier", "width": 4, "feature_dim": 16},
    "train": {"steps": 30, "batch_size": 64, "lr": 0.01, "progress": False, "log_every": 10,
              "ckpt_every": 30, "sample_every": 1000},
    "eval": {"batch_size": 100},
}


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
    cfg = build_config(TINY_CLASSIFIER, recipe="tiny_classifier")
    run_dir = tmp_path_factory.mktemp("clf") / "run"
    Trainer(cfg, run_dir).fit()
    return run_dir, cfg


def test_classifier_learns_and_reports_accuracy(classifier_run):
    from shortrun.run import load_run

    run_dir, cfg = classifier_run
    run = load_run(run_dir)
    out = run.model.evaluate(["accuracy"], load_data(cfg.data), run_dir, run.cfg)
    # 30 steps on the 8×8 digits: far above the 10% of chance, reached by any working update.
    assert out["accuracy_n"] == 297 and out["accuracy"] > 0.5


def test_run_dir_is_an_extractor_with_range_conversion(classifier_run):
    run_dir, cfg = classifier_run
    ex = load_extractor(str(run_dir))
    data = load_data(cfg.data)
    x = data.test[:20]
    feats = ex(x)
    assert feats.shape == (20, 16) and ex.dim == 16
    # The same images given in [0, 1] (unit) space map to the same features.
    unit = DataInfo(shape=(1, 8, 8), kind="image", low=0.0, high=1.0, raw_scale=16.0)
    torch.testing.assert_close(ex((x + 1) / 2, unit), feats, rtol=1e-5, atol=1e-5)
    # Binary {0, 1} data counts as the range [0, 1].
    binary = DataInfo(shape=(1, 8, 8), kind="binary", low=0.0, high=1.0)
    hard = (x > 0).float()
    torch.testing.assert_close(ex(hard, binary), ex(hard * 2 - 1), rtol=1e-5, atol=1e-5)
    # Flattened input is reshaped to square images.
    torch.testing.assert_close(ex(x.reshape(20, 64)), feats)
    assert ex.features(x, batch_size=7).shape == (20, 16)


def test_fd_kid_of_data_against_itself_and_noise(classifier_run):
    run_dir, cfg = classifier_run
    ex = load_extractor(str(run_dir))
    data = load_data(cfg.data)
    same = fd_kid(ex, data.train[:500], data.train[500:1000], data.info, kid_subsets=5)
    noise = fd_kid(ex, torch.rand(500, 1, 8, 8) * 2 - 1, data.train[:500], data.info,
                   kid_subsets=5)
    assert same["fd_n"] == 500 and same["fd_n_ref"] == 500 and same["kid_n"] == 500
    assert noise["fd"] > 5 * same["fd"] and noise["kid"] > 5 * abs(same["kid"])
    only_fd = fd_kid(ex, data.train[:50], data.train[50:100], data.info, metrics=("fd",))
    assert set(only_fd) == {"fd", "fd_n", "fd_n_ref"}


def test_named_extractor_found_via_env(classifier_run, monkeypatch, tmp_path):
    run_dir, _ = classifier_run
    (tmp_path / "mnist").symlink_to(run_dir)
    monkeypatch.setenv("SHORTRUN_FEATURES", str(tmp_path))
    assert load_extractor("mnist").name == "mnist"


def test_missing_named_extractor_says_which_recipe(monkeypatch, tmp_path):
    monkeypatch.setenv("SHORTRUN_FEATURES", str(tmp_path))
    monkeypatch.delenv("SHORTRUN_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match=r"'fashion' not found .*shortrun train "
                                        r"classifier_fashion --out runs/features/fashion"):
        load_extractor("fashion")
    with pytest.raises(DataError, match="not a classifier run directory.*classifier_mnist"):
        load_extractor(str(tmp_path / "nowhere"))


def test_non_classifier_run_is_refused(tmp_path):
    cfg = build_config({"data": {"name": "8gaussians"},
                        "model": {"name": "ebm", "hidden": 8, "langevin_steps": 2,
                                  "buffer_size": 64},
                        "train": {"steps": 1, "batch_size": 32, "progress": False}})
    Trainer(cfg, tmp_path / "ebm").fit()
    with pytest.raises(ConfigError, match="must be a `classifier` run"):
        load_extractor(str(tmp_path / "ebm"))


def test_default_spec_per_dataset():
    cfg = build_config(TINY_CLASSIFIER)
    with pytest.raises(ConfigError, match="no default feature extractor for dataset 'digits'"):
        default_extractor_spec(cfg)
    cfg.eval.extractor = "inception:/x.pth"
    assert default_extractor_spec(cfg) == "inception:/x.pth"


def test_classifier_refuses_sampling_and_vector_data(classifier_run):
    from shortrun.run import load_run

    with pytest.raises(ConfigError, match="not a generative model"):
        load_run(classifier_run[0]).model.sample(4)
    with pytest.raises(ConfigError, match="needs image data"):
        Trainer(build_config({"data": {"name": "8gaussians"}, "model": {"name": "classifier"},
                              "train": {"steps": 1}}), "/tmp/unused-never-created")


def test_features_are_deterministic(classifier_run):
    ex = load_extractor(str(classifier_run[0]))
    x = torch.rand(8, 1, 8, 8) * 2 - 1
    np.testing.assert_array_equal(ex.features(x), ex.features(x))


def test_classifier_floor_metrics(classifier_run):
    from shortrun.run import load_run

    run_dir, cfg = classifier_run
    run = load_run(run_dir)
    run.cfg.eval.n_samples = 200
    out = run.model.evaluate(["fd_floor", "kid_floor"], load_data(cfg.data), run_dir, run.cfg)
    assert out["fd_floor_n"] == 200 and out["fd_floor_n_ref"] == 297 and out["fd_floor"] >= 0
    assert out["kid_floor_n"] == 200 and "kid_floor_std" in out and "accuracy" not in out


def test_model_fd_kid_samples_in_batches(classifier_run):
    run_dir, cfg = classifier_run
    data = load_data(cfg.data)
    calls = []

    class FakeModel:
        def sample(self, n):
            calls.append(n)
            return data.train[:n] + 0.0

    cfg = build_config({**TINY_CLASSIFIER, "eval": {"n_samples": 250, "batch_size": 100,
                                                    "extractor": str(run_dir)}})
    out = model_fd_kid(FakeModel(), data, cfg, ("fd",))
    assert calls == [100, 100, 50]
    assert out["fd_n"] == 250 and out["fd_n_ref"] == len(data.test)
