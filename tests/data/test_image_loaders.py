"""SVHN (.mat), CIFAR-10 (python pickle batches) and CelebA (image folder) loaders, tested on
tiny files written here in the real formats."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch

from shortrun.data.celeba import CelebaOptions, load_celeba
from shortrun.data.cifar10 import Cifar10Options, load_cifar10, read_batch
from shortrun.data.svhn import SvhnOptions, load_svhn
from shortrun.errors import DataError


def _svhn_mat(path, n, seed):
    from scipy.io import savemat

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
    y = rng.integers(1, 11, size=(n, 1)).astype(np.uint8)  # SVHN labels 1..10, 10 = digit 0
    savemat(path, {"X": x, "y": y})
    return x, y


def test_svhn_reads_mat_files_into_chw_minus_one_one(tmp_path):
    (tmp_path / "svhn").mkdir()
    x, y = _svhn_mat(tmp_path / "svhn" / "train_32x32.mat", 7, 0)
    _svhn_mat(tmp_path / "svhn" / "test_32x32.mat", 3, 1)
    data = load_svhn(SvhnOptions(data_dir=str(tmp_path)))
    assert data.train.shape == (7, 3, 32, 32) and data.test.shape == (3, 3, 32, 32)
    # pixel (row 5, col 9, channel 2) of image 4 lands at [4, 2, 5, 9], scaled to [-1, 1]
    assert float(data.train[4, 2, 5, 9]) == pytest.approx(x[5, 9, 2, 4] / 127.5 - 1, abs=1e-6)
    assert data.train_labels.tolist() == [int(v) % 10 for v in y[:, 0]]
    assert float(data.train.min()) >= -1 and float(data.train.max()) <= 1
    assert data.info.to_data_scale(data.train)[4, 2, 5, 9] == pytest.approx(x[5, 9, 2, 4],
                                                                             abs=1e-3)


def test_svhn_missing_and_malformed_files_say_what_to_do(tmp_path):
    with pytest.raises(DataError, match=r"svhn: missing train_32x32.mat .*housenumbers"):
        load_svhn(SvhnOptions(data_dir=str(tmp_path)))
    from scipy.io import savemat

    savemat(tmp_path / "train_32x32.mat", {"X": np.zeros((32, 32, 3, 2), np.uint8),
                                           "y": np.zeros((5, 1))})
    _svhn_mat(tmp_path / "test_32x32.mat", 2, 0)
    with pytest.raises(DataError, match=r"expected \(32, 32, 3, N\) with N = 5 labels"):
        load_svhn(SvhnOptions(data_dir=str(tmp_path)))


def _cifar_batch(path, n, seed):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
    labels = [int(v) for v in rng.integers(0, 10, n)]
    with open(path, "wb") as f:  # the official batches are protocol-2 pickles of a dict
        pickle.dump({b"batch_label": b"x", b"labels": labels, b"data": data,
                     b"filenames": [b"a.png"] * n}, f, protocol=2)
    return data, labels


def test_cifar10_reads_python_batches(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    first = _cifar_batch(folder / "data_batch_1", 4, 0)
    for i in range(2, 6):
        _cifar_batch(folder / f"data_batch_{i}", 4, i)
    _cifar_batch(folder / "test_batch", 2, 9)
    data = load_cifar10(Cifar10Options(data_dir=str(tmp_path)))
    assert data.train.shape == (20, 3, 32, 32) and data.test.shape == (2, 3, 32, 32)
    # a row is 1024 red, 1024 green, 1024 blue values, each row-major 32×32
    row = first[0][1]
    assert float(data.train[1, 1, 3, 7]) == pytest.approx(row[1024 + 3 * 32 + 7] / 127.5 - 1,
                                                          abs=1e-6)
    assert data.train_labels[:4].tolist() == first[1]


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_cifar10_refuses_a_pickle_that_would_run_code(tmp_path):
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({b"data": _Evil()}, protocol=2))
    with pytest.raises(DataError, match=r"refusing to load (posix|os|nt)\.system"):
        read_batch(path)


def test_cifar10_missing_batch_and_samples_fallback(tmp_path, data_dir):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    _cifar_batch(folder / "data_batch_1", 2, 0)
    with pytest.raises(DataError, match=r"missing .*data_batch_2; unpack"):
        load_cifar10(Cifar10Options(data_dir=str(tmp_path)))
    # the 200 + 20 real CIFAR-10 images of shared/data
    real = load_cifar10(Cifar10Options(data_dir=str(data_dir)))
    assert real.train.shape == (200, 3, 32, 32) and real.test_labels[:3].tolist() == [3, 8, 8]


def test_celeba_center_crops_and_resizes_to_64(tmp_path):
    from PIL import Image

    folder = tmp_path / "celeba" / "img_align_celeba"
    folder.mkdir(parents=True)
    for i in range(3):
        # 178×218 like aligned CelebA: a red centre square on blue top/bottom bands
        arr = np.zeros((218, 178, 3), np.uint8)
        arr[:, :, 2] = 255
        arr[20:198, :, :] = (255, 0, 0)
        Image.fromarray(arr).save(folder / f"{i:06d}.png")
    data = load_celeba(CelebaOptions(data_dir=str(tmp_path), n_train=2, n_test=1))
    assert data.train.shape == (2, 3, 64, 64) and data.test.shape == (1, 3, 64, 64)
    # the centre 178×178 crop is all red: blue bands are cut away
    assert torch.allclose(data.train[:, 0], torch.ones(2, 64, 64), atol=1e-2)
    assert torch.allclose(data.train[:, 2], -torch.ones(2, 64, 64), atol=1e-2)


def test_celeba_errors(tmp_path):
    with pytest.raises(DataError, match="celeba64: no image folder"):
        load_celeba(CelebaOptions(data_dir=str(tmp_path)))
    (tmp_path / "celeba").mkdir()
    (tmp_path / "celeba" / "a.jpg").write_bytes(b"not an image")
    with pytest.raises(DataError, match=r"has 1 images but data.n_train \+ data.n_test = 3"):
        load_celeba(CelebaOptions(data_dir=str(tmp_path), n_train=2, n_test=1))
    with pytest.raises(DataError, match="cannot read image"):
        load_celeba(CelebaOptions(data_dir=str(tmp_path), n_train=1, n_test=0))
