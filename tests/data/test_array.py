"""A user's own array or .npz file as a dataset: kind and range inference, the map to the
model's scale and back, and every refusal with its message."""

import numpy as np
import pytest
import torch

from shortrun.data.array import NpzOptions, array_data, check_loaded, infer_info, save_npz
from shortrun.data.base import DataInfo, LoadedData
from shortrun.data.registry import load_data
from shortrun.errors import ConfigError, DataError
from shortrun.train.config import build_config


def test_uint8_images_map_to_minus_one_one_and_back_exactly():
    x = np.arange(0, 256, dtype=np.uint8).reshape(1, 16, 16).repeat(3, 0)  # (N, H, W)
    data = array_data(x)
    info = data.info
    assert info.kind == "image" and info.shape == (1, 16, 16)
    assert (info.low, info.high, info.raw_scale, info.raw_offset) == (-1.0, 1.0, 127.5, 127.5)
    assert data.train.dtype == torch.get_default_dtype()
    assert float(data.train.min()) == -1.0 and float(data.train.max()) == 1.0
    back = info.to_data_scale(data.train)
    assert torch.equal(back.round().to(torch.uint8), torch.from_numpy(x)[:, None])
    assert torch.allclose(info.to_model_scale(x[:, None]), data.train)


def test_zero_to_sixteen_digits_get_the_digits_loaders_map():
    x = torch.randint(0, 17, (50, 1, 8, 8)).float()
    x[0, 0, 0, 0], x[0, 0, 0, 1] = 0, 16
    info = array_data(x).info
    assert info.kind == "image" and (info.raw_scale, info.raw_offset) == (8.0, 8.0)


@pytest.mark.parametrize("values, expected", [
    ((0.0, 1.0, 0.5), (0.5, 0.5)),        # [0, 1] floats
    ((-1.0, 1.0, 0.2), (1.0, 0.0)),       # already the model's scale
    ((0.0, 200.0, 255.0), (127.5, 127.5)),  # 8-bit integers stored as floats
    ((-3.0, 5.0, 0.1), (4.0, 1.0)),       # anything else: min to max
])
def test_detected_image_range(values, expected):
    x = torch.tensor(values).repeat(4, 1, 2, 1).reshape(4, 1, 2, 3)
    info = infer_info(x)
    assert (info.raw_scale, info.raw_offset) == expected


def test_declared_range_wins_and_is_checked():
    x = torch.rand(10, 1, 4, 4) * 100
    info = infer_info(x, low=0, high=100)
    assert (info.raw_scale, info.raw_offset) == (50.0, 50.0)
    with pytest.raises(DataError, match=r"values span \[.*\], outside the declared \[0, 50\]"):
        infer_info(x, low=0, high=50)


def test_vectors_stay_as_they_are_and_zero_one_data_is_binary():
    v = torch.randn(100, 2) * 3
    info = infer_info(v)
    assert info.kind == "vector" and info.shape == (2,)
    assert (info.raw_scale, info.raw_offset) == (1.0, 0.0)
    assert torch.equal(array_data(v).train, v)
    b = (torch.rand(20, 6) < 0.5).to(torch.uint8)
    data = array_data(b)
    assert data.info.kind == "binary" and data.train.dtype == torch.get_default_dtype()
    assert torch.equal(data.train, b.float())


def test_channels_last_images_are_moved_to_channels_first():
    x = np.random.default_rng(0).integers(0, 256, (5, 8, 8, 3), dtype=np.uint8)
    data = array_data(x)
    assert data.info.shape == (3, 8, 8)
    assert torch.allclose(data.train[:, 2], torch.from_numpy(x[..., 2]) / 127.5 - 1)


def test_binarize_thresholds_in_the_datas_scale():
    x = torch.tensor([[0.0, 7.0, 8.0, 16.0]]).repeat(3, 1)
    data = array_data(x, binarize=8)
    assert data.info.kind == "binary"
    assert data.train[0].tolist() == [0.0, 0.0, 1.0, 1.0]


def test_binary_declared_on_zero_to_sixteen_data_names_the_fix():
    x = torch.randint(0, 17, (30, 64)).float()
    with pytest.raises(DataError, match=r"data.kind: binary, but the values span \[0, 16\], not "
                                        r"\{0, 1\}: set data.binarize=THRESHOLD"):
        array_data(x, kind="binary")


def test_refusals_name_what_to_do():
    with pytest.raises(DataError, match="NaN or infinite values"):
        infer_info(torch.tensor([[0.0], [float("nan")]]))
    with pytest.raises(DataError, match=r"image needs \(N, C, H, W\) examples"):
        infer_info(torch.rand(4, 5), kind="image")
    with pytest.raises(DataError, match=r"the range \[3.5, 3.5\] is empty"):
        infer_info(torch.full((4, 1, 2, 2), 3.5))
    with pytest.raises(DataError, match="contradicts data.kind='vector'"):
        array_data(torch.rand(4, 3), binarize=0.5, kind="vector")
    with pytest.raises(DataError, match="x_test: examples shaped"):
        array_data(torch.rand(4, 3), torch.rand(4, 2))
    with pytest.raises(DataError, match="y_train: 3 labels for 4 examples"):
        array_data(torch.rand(4, 3), y_train=np.zeros(3))
    with pytest.raises(DataError, match="expected a torch.Tensor or numpy.ndarray; got list"):
        array_data([[1.0, 2.0]])


def test_x_test_uses_the_map_of_x_train():
    x = np.full((4, 1, 2, 2), 255, np.uint8)
    x[0] = 0
    data = array_data(x, x_test=np.full((2, 1, 2, 2), 51, np.uint8), y_train=np.arange(4),
                      y_test=[1, 2])
    assert torch.allclose(data.test, torch.full((2, 1, 2, 2), 51 / 127.5 - 1))
    assert data.train_labels.tolist() == [0, 1, 2, 3] and data.test_labels.tolist() == [1, 2]


def test_to_model_scale_is_the_inverse_of_to_data_scale():
    info = DataInfo(shape=(1, 8, 8), kind="image", low=-1.0, high=1.0, raw_scale=8.0,
                    raw_offset=8.0)
    x = torch.rand(3, 1, 8, 8) * 2 - 1
    assert torch.allclose(info.to_model_scale(info.to_data_scale(x)), x)
    assert info.to_model_scale(np.array([16], dtype=np.int64)).tolist() == [1.0]


def test_npz_file_with_a_single_x(tmp_path):
    path = tmp_path / "mine.npz"
    np.savez(path, x=np.random.default_rng(0).integers(0, 256, (6, 4, 4), dtype=np.uint8))
    cfg = build_config({"data": {"name": "npz", "path": str(path)},
                        "model": {"name": "ebm"}, "train": {"steps": 1}})
    data = load_data(cfg.data)
    assert data.info.shape == (1, 4, 4) and data.info.raw_scale == 127.5
    assert data.extras["dataset"] == "npz"


def test_npz_path_from_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "env.npz"
    np.savez(path, x_train=np.random.default_rng(0).standard_normal((5, 2)))
    monkeypatch.setenv("SHORTRUN_NPZ", str(path))
    assert load_data(NpzOptions()).train.shape == (5, 2)


def test_npz_refusals(tmp_path, monkeypatch):
    monkeypatch.delenv("SHORTRUN_NPZ", raising=False)
    with pytest.raises(DataError, match="set data.path=FILE.npz or SHORTRUN_NPZ=FILE.npz"):
        load_data(NpzOptions())
    with pytest.raises(DataError, match="does not exist"):
        load_data(NpzOptions(path=str(tmp_path / "nope.npz")))
    np.savez(tmp_path / "wrong.npz", images=np.zeros((2, 2)))
    with pytest.raises(DataError, match="has keys images; it needs x_train"):
        load_data(NpzOptions(path=str(tmp_path / "wrong.npz")))
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(DataError, match="is not a readable .npz file"):
        load_data(NpzOptions(path=str(tmp_path / "junk.npz")))


def test_saved_npz_round_trips_model_space_exactly(tmp_path):
    info = DataInfo(shape=(1, 2, 2), kind="image", low=-1.0, high=1.0, raw_scale=127.5,
                    raw_offset=127.5)
    data = LoadedData(train=torch.rand(5, 1, 2, 2) * 2 - 1, info=info,
                      test=torch.rand(2, 1, 2, 2) * 2 - 1, train_labels=torch.arange(5),
                      test_labels=torch.tensor([0, 1]))
    back = load_data(NpzOptions(path=str(save_npz(data, tmp_path / "data.npz"))))
    assert back.info == info
    for a, b in ((back.train, data.train), (back.test, data.test),
                 (back.train_labels, data.train_labels), (back.test_labels, data.test_labels)):
        assert torch.equal(a, b)


def test_array_from_a_recipe_points_to_npz():
    cfg = build_config({"data": {"name": "array"}, "model": {"name": "ebm"},
                        "train": {"steps": 1}})
    with pytest.raises(DataError, match="use data.name=npz with data.path=FILE.npz"):
        load_data(cfg.data)
    with pytest.raises(ConfigError, match="data.kind: must be one of"):
        build_config({"data": {"name": "npz", "kind": "colour"}, "model": {"name": "ebm"},
                      "train": {"steps": 1}})


def test_check_loaded_refuses_a_binary_claim_on_zero_to_sixteen_data():
    data = LoadedData(train=torch.randint(0, 17, (10, 64)).float(),
                      info=DataInfo(shape=(64,), kind="binary", low=0.0, high=1.0))
    with pytest.raises(DataError, match=r"info.kind is 'binary' but the values span \[0, 16\]"):
        check_loaded(data)
    data = LoadedData(train=torch.rand(10, 28, 28), info=DataInfo((1, 28, 28), "image"))
    with pytest.raises(DataError, match=r"shaped \(28, 28\) but info.shape is \(1, 28, 28\)"):
        check_loaded(data)
