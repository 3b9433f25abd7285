"""``shortrun.fit`` without a run directory: nothing on disk, the metrics in memory; data
options from Python; YAML keys in messages name their Python argument; ``model.fit``."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
import torch

import shortrun
from shortrun.errors import ConfigError, DataError
from shortrun.models.rbm import BernoulliRBM
from shortrun.train.fit import fit, python_names

QUIET = {"progress": False, "log_every": 5}


def _files_under(folder):
    return {p for p in __import__("pathlib").Path(folder).rglob("*")}


def test_fit_without_run_dir_writes_nothing_in_the_temp_folder(tmp_path, monkeypatch):
    """The temp folder (and the working directory) hold no new file after fit."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    assert tempfile.gettempdir() == str(tmp_path / "tmp")
    x = (np.random.default_rng(0).random((60, 6)) < 0.5).astype(np.float32)
    model = fit(BernoulliRBM(n_hidden=3, learning="cd"), x, steps=10, batch_size=10, **QUIET)
    assert _files_under(tmp_path) == {tmp_path / "tmp", tmp_path / "cwd"}
    assert model.run_dir is None
    assert [row["step"] for row in model.history] == [5, 10]
    assert set(model.history[0]) >= {"loss", "energy_pos", "energy_neg", "lr_main"}


def test_checkpoint_true_writes_a_run_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    x = (np.random.default_rng(0).random((60, 6)) < 0.5).astype(np.float32)
    model = fit(BernoulliRBM(n_hidden=3, learning="cd"), x, steps=2, batch_size=10,
                checkpoint=True, **QUIET)
    assert model.run_dir.parent == tmp_path
    assert (model.run_dir / "checkpoints" / "last.pt").is_file()


def test_binarize_from_python_gives_binary_data():
    x = np.random.default_rng(0).random((40, 5)) * 16  # 0-16, like the digits
    model = fit(BernoulliRBM(n_hidden=2, learning="cd"), x, steps=2, batch_size=10,
                binarize=8, **QUIET)
    assert model.info.kind == "binary"


def test_probabilities_in_unit_range_are_taken_as_visible_probabilities():
    x = np.random.default_rng(0).random((40, 5)).astype(np.float32)
    model = fit(BernoulliRBM(n_hidden=2, learning="cd"), x, steps=2, batch_size=10, **QUIET)
    assert model.info.kind == "vector" and model.transform(x).shape == (40, 2)


def test_values_outside_unit_range_are_refused_naming_the_python_argument():
    x = np.random.default_rng(0).random((40, 5)) * 3
    with pytest.raises(ConfigError, match=r"span \[.*\]: scale them to \[0, 1\].*binarize= of "
                                          r"shortrun.fit for data.binarize"):
        fit(BernoulliRBM(n_hidden=2), x, steps=2, batch_size=10, **QUIET)


def test_images_must_be_binarized_or_flattened():
    x = np.random.default_rng(0).random((40, 1, 4, 4))
    with pytest.raises(ConfigError, match=r"this dataset is 'image'.*flatten images"):
        fit(BernoulliRBM(n_hidden=2), x, steps=2, batch_size=10, **QUIET)


@pytest.mark.parametrize("kwargs, message", [
    ({"batch_size": 500}, r"train.batch_size: 500 is larger than the training set.*"
                          r"batch_size= of shortrun.fit for train.batch_size"),
    ({"batch_size": 10, "kind": "binary"}, r"set data.binarize.*binarize= of shortrun.fit"),
])
def test_yaml_keys_in_messages_name_the_python_argument(kwargs, message):
    x = np.random.default_rng(0).random((40, 5))
    with pytest.raises((ConfigError, DataError), match=message):
        fit(BernoulliRBM(n_hidden=2), x, steps=2, **kwargs, **QUIET)


def test_python_names_keeps_the_message_and_appends_each_key_once():
    got = python_names("train.lr too big; lower train.lr or set model.k")
    assert got.startswith("train.lr too big; lower train.lr or set model.k (from Python: ")
    assert got.count("lr= of shortrun.fit for train.lr") == 1
    assert "k= of the model's constructor for model.k" in got
    assert python_names("nothing to name") == "nothing to name"


def test_data_options_do_not_apply_to_loaded_data():
    from shortrun.data.array import array_data

    loaded = array_data((torch.rand(20, 4) < 0.5).float())
    with pytest.raises(ConfigError, match=r"binarize= apply to an array"):
        fit(BernoulliRBM(n_hidden=2), loaded, steps=1, batch_size=10, binarize=0.5)


def test_model_fit_is_shortrun_fit():
    x = (np.random.default_rng(1).random((40, 6)) < 0.5).astype(np.float32)
    a = shortrun.BernoulliRBM(n_hidden=3, learning="cd")
    b = shortrun.BernoulliRBM(n_hidden=3, learning="cd")
    torch.manual_seed(0)
    a0 = a.fit(x, steps=4, batch_size=10, seed=3, **QUIET)
    torch.manual_seed(0)
    fit(b, x, steps=4, batch_size=10, seed=3, **QUIET)
    assert a0 is a
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k


def test_a_model_keyword_error_names_the_keyword_too():
    with pytest.raises(ConfigError, match=r"model.k: must be > 0; got 0 \(from Python: k= of "
                                          r"the model's constructor for model.k\)"):
        BernoulliRBM(n_hidden=2, k=0)
