import gzip
import struct

import numpy as np
import pytest
import torch

from shortrun.data.digits import DigitsOptions, load_digits
from shortrun.data.idx import read_idx
from shortrun.data.mnist import MnistOptions, load_mnist, pooled_anomaly_split
from shortrun.errors import DataError


def write_idx(path, array):
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(
        ">" + "I" * array.ndim, *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_digits_scales():
    d = load_digits(DigitsOptions())
    assert d.train.shape == (1500, 1, 8, 8) and d.test.shape == (297, 1, 8, 8)
    assert d.train.min() >= -1 and d.train.max() <= 1
    raw = d.info.to_data_scale(d.train)
    assert raw.min() >= 0 and raw.max() <= 16 and torch.allclose(raw, raw.round())
    b = load_digits(DigitsOptions(binarize=True))
    assert set(b.train.unique().tolist()) == {0.0, 1.0} and b.info.kind == "binary"


def test_mnist_from_idx_files(tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "mnist"
    folder.mkdir()
    x_tr, y_tr = rng.integers(0, 256, (20, 28, 28)), rng.integers(0, 10, 20)
    write_idx(folder / "train-images-idx3-ubyte.gz", x_tr)
    write_idx(folder / "train-labels-idx1-ubyte.gz", y_tr)
    write_idx(folder / "t10k-images-idx3-ubyte.gz", x_tr[:5])
    write_idx(folder / "t10k-labels-idx1-ubyte.gz", y_tr[:5])
    d = load_mnist(MnistOptions(data_dir=str(tmp_path), anomaly_digit=int(y_tr[0])))
    assert (d.train_labels != int(y_tr[0])).all()
    raw = d.info.to_data_scale(d.test)
    np.testing.assert_allclose(raw[:, 0].numpy(), x_tr[:5], atol=1e-3)
    pooled = load_mnist(MnistOptions(data_dir=str(tmp_path), anomaly_digit=int(y_tr[0]),
                                     anomaly_split="pooled"))
    assert len(pooled.train) + len(pooled.test) == 25  # every image, once


def test_pooled_anomaly_split_is_the_described_protocol():
    """Zenati et al. 2018: 80% of the pooled normal images train; the other 20% and every
    anomaly test; nothing is in both; the permutation is NumPy's RandomState(seed)."""
    y_tr, y_te = torch.arange(70) % 10, torch.arange(30) % 10
    # each image carries its pooled index, so membership can be read back
    x_tr = torch.arange(70.0).reshape(70, 1, 1, 1)
    x_te = torch.arange(70.0, 100.0).reshape(30, 1, 1, 1)
    xa, ya, xb, yb = pooled_anomaly_split(x_tr, y_tr, x_te, y_te, digit=3, seed=42)
    train_ids, test_ids = set(xa.reshape(-1).long().tolist()), set(xb.reshape(-1).long().tolist())
    assert not train_ids & test_ids and len(train_ids | test_ids) == 100
    assert (ya != 3).all() and len(xa) == int(90 * 0.8) == 72
    assert int((yb == 3).sum()) == 10 and len(xb) == 28
    normal = np.flatnonzero(torch.cat([y_tr, y_te]).numpy() != 3)
    expected = normal[np.random.RandomState(42).permutation(90)[:72]]
    assert xa.reshape(-1).long().tolist() == expected.tolist()
    again = pooled_anomaly_split(x_tr, y_tr, x_te, y_te, digit=3, seed=42)
    assert torch.equal(again[0], xa) and torch.equal(again[2], xb)


def test_missing_files_say_which_and_where(tmp_path):
    with pytest.raises(DataError, match=r"mnist: no data files in .*expected mnist.npz or "
                       r"mnist/train-images-idx3-ubyte.gz; get them from"):
        load_mnist(MnistOptions(data_dir=str(tmp_path)))
    (tmp_path / "mnist").mkdir()
    write_idx(tmp_path / "mnist" / "train-images-idx3-ubyte.gz", np.zeros((2, 28, 28)))
    with pytest.raises(DataError, match=r"missing .*train-labels-idx1-ubyte.gz"):
        load_mnist(MnistOptions(data_dir=str(tmp_path)))


def test_no_data_dir(monkeypatch):
    monkeypatch.delenv("SHORTRUN_DATA", raising=False)
    with pytest.raises(DataError, match="pass --data-dir DIR or set SHORTRUN_DATA"):
        load_mnist(MnistOptions())


def test_truncated_idx(tmp_path):
    path = tmp_path / "x.gz"
    write_idx(path, np.zeros((3, 4)))
    data = gzip.decompress(path.read_bytes())[:-2]
    path.write_bytes(gzip.compress(data))
    with pytest.raises(DataError, match="truncated idx file"):
        read_idx(path)


def test_real_mnist_and_fashion(data_dir):
    m = load_mnist(MnistOptions(data_dir=str(data_dir)))
    assert m.train.shape == (60_000, 1, 28, 28) and m.test.shape == (10_000, 1, 28, 28)
    assert abs(float((m.train + 1).mean() / 2) - 0.1307) < 1e-3  # published pixel mean
    idx = read_idx(data_dir / "mnist" / "t10k-images-idx3-ubyte.gz")
    np.testing.assert_array_equal(m.info.to_data_scale(m.test)[:, 0].round().numpy(), idx)
    f = load_mnist(MnistOptions(name="fashion", data_dir=str(data_dir), scale="unit"))
    assert f.train.shape == (60_000, 1, 28, 28)
    assert abs(float(f.train.mean()) - 0.2860) < 1e-3
    assert torch.bincount(f.train_labels).tolist() == [6000] * 10
