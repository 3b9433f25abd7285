"""The held-out-digit splits against an independent re-implementation of the papers' loader.

The reference below is written from the description of Zenati et al.'s ``data/mnist.py`` (the
file Kumar et al. 2019 reuse): one module-level ``RandomState(42)``; a function that pools
``[x_train, x_test, x_valid]`` of a 50k/10k/10k ``mnist.npz``, masks the normals, permutes them,
cuts at 80 %, appends the held-out digit to the test part and permutes that; the scripts call
it for ``"train"`` and then for ``"test"``. It uses boolean masks and NumPy fancy indexing on
arrays, where shortrun uses torch index tensors, so a shared mistake is unlikely.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from shortrun.data.anomaly_split import carve_validation, zenati_anomaly_split
from shortrun.data.mnist import MnistOptions, load_mnist, pooled_anomaly_split
from shortrun.errors import ConfigError


class PapersLoader:
    """The loader as the papers' scripts run it: one generator for both calls."""

    def __init__(self, npz: dict[str, np.ndarray], seed: int = 42) -> None:
        self.npz, self.rng = npz, np.random.RandomState(seed)

    def get(self, split: str, label: int) -> tuple[np.ndarray, np.ndarray]:
        keys = ("train", "test", "valid")
        full_x = np.concatenate([self.npz[f"x_{k}"] for k in keys if f"x_{k}" in self.npz])
        full_y = np.concatenate([self.npz[f"y_{k}"] for k in keys if f"y_{k}" in self.npz])
        nx, ny = full_x[full_y != label], full_y[full_y != label]
        p = self.rng.permutation(nx.shape[0])
        nx, ny = nx[p], ny[p]
        cut = int(nx.shape[0] * 0.8)
        tx = np.concatenate([nx[cut:], full_x[full_y == label]])
        ty = np.concatenate([ny[cut:], full_y[full_y == label]])
        q = self.rng.permutation(tx.shape[0])
        tx, ty = tx[q], ty[q]
        return (nx[:cut], ny[:cut]) if split == "train" else (tx, ty)


def papers_npz(x_train, y_train, x_test, y_test) -> dict[str, np.ndarray]:
    """The deeplearning.net layout: train = first 50k training images, valid = last 10k."""
    return {"x_train": x_train[:50000], "y_train": y_train[:50000], "x_test": x_test,
            "y_test": y_test, "x_valid": x_train[50000:], "y_valid": y_train[50000:]}


def id_images(n_train: int, n_test: int):
    """Images that carry their pooled index (train first), and labels 0..9 repeating."""
    x_tr = torch.arange(float(n_train)).reshape(n_train, 1, 1)
    x_te = torch.arange(float(n_train), float(n_train + n_test)).reshape(n_test, 1, 1)
    return x_tr, torch.arange(n_train) % 10, x_te, (torch.arange(n_test) * 7) % 10


def test_zenati_split_equals_the_papers_loader_run_as_their_scripts_run_it():
    x_tr, y_tr, x_te, y_te = id_images(50_037, 331)  # > 50k, so valid is not empty
    ref = PapersLoader(papers_npz(*(t.numpy() for t in (x_tr, y_tr, x_te, y_te))))
    ref_train, ref_test = ref.get("train", 4), ref.get("test", 4)
    got = zenati_anomaly_split(x_tr, y_tr, x_te, y_te, digit=4, seed=42)
    assert np.array_equal(got[0].numpy(), ref_train[0]) and np.array_equal(got[1], ref_train[1])
    assert np.array_equal(got[2].numpy(), ref_test[0]) and np.array_equal(got[3], ref_test[1])
    # what the second draw means: most test normals were training images
    train_ids = set(got[0].reshape(-1).long().tolist())
    normals = got[2][got[3] != 4].reshape(-1).long().tolist()
    seen = sum(i in train_ids for i in normals) / len(normals)
    assert 0.75 < seen < 0.85


def test_pooled_split_equals_one_call_of_the_loader_on_train_then_test():
    x_tr, y_tr, x_te, y_te = id_images(700, 300)
    ref = PapersLoader({"x_train": x_tr.numpy(), "y_train": y_tr.numpy(),
                        "x_test": x_te.numpy(), "y_test": y_te.numpy()})
    ref_train = ref.get("train", 3)
    ref_test = PapersLoader(ref.npz).get("test", 3)  # a fresh generator: one call
    got = pooled_anomaly_split(x_tr, y_tr, x_te, y_te, digit=3, seed=42)
    assert np.array_equal(got[0].numpy(), ref_train[0]) and np.array_equal(got[1], ref_train[1])
    assert np.array_equal(got[2].numpy(), ref_test[0]) and np.array_equal(got[3], ref_test[1])
    assert not set(got[0].reshape(-1).tolist()) & set(got[2].reshape(-1).tolist())


MNIST = Path(os.environ.get("SHORTRUN_DATA", "/nonexistent")) / "mnist.npz"


@pytest.mark.skipif(not MNIST.is_file(), reason="needs $SHORTRUN_DATA/mnist.npz")
@pytest.mark.parametrize("split", ["zenati", "pooled"])
def test_real_mnist_images_are_bit_exact(split):
    raw = dict(np.load(MNIST))
    digit = 7
    if split == "zenati":
        ref = PapersLoader(papers_npz(raw["x_train"], raw["y_train"], raw["x_test"],
                                      raw["y_test"]))
        (tx, ty), (sx, sy) = ref.get("train", digit), ref.get("test", digit)
    else:
        (tx, ty) = PapersLoader(raw).get("train", digit)
        (sx, sy) = PapersLoader(raw).get("test", digit)
    d = load_mnist(MnistOptions(scale="unit", anomaly_digit=digit, anomaly_split=split))
    for ours, pixels, labels, our_labels in ((d.train, tx, ty, d.train_labels),
                                             (d.test, sx, sy, d.test_labels)):
        expected = torch.from_numpy(pixels.astype(np.float32)) / 255.0
        assert torch.equal(ours[:, 0], expected)
        assert np.array_equal(our_labels.numpy(), labels.astype(np.int64))
    assert len(d.test) == len(sx) and int((d.test_labels == digit).sum()) == 7293


def test_validation_comes_from_training_only():
    x_tr, y_tr, x_te, y_te = id_images(2000, 500)
    xa, ya, xb, yb = pooled_anomaly_split(x_tr, y_tr, x_te, y_te, digit=3)
    ka, kya, va, vy = carve_validation(xa, ya, val_digit=5, fraction=0.1, seed=43)
    train_ids, val_ids = set(ka.reshape(-1).tolist()), set(va.reshape(-1).tolist())
    assert not train_ids & val_ids and train_ids | val_ids == set(xa.reshape(-1).tolist())
    assert not (train_ids | val_ids) & set(xb.reshape(-1).tolist())
    assert (kya != 5).all() and int((vy == 5).sum()) == int((ya == 5).sum())
    n_normal = int((ya != 5).sum())
    assert int((vy != 5).sum()) == round(0.1 * n_normal)
    assert torch.equal(ka.reshape(-1), torch.sort(ka.reshape(-1)).values.new_tensor(
        [v for v in xa.reshape(-1).tolist() if v in train_ids]))  # training order kept


def test_validation_leaves_the_test_split_bit_identical(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (300, 28, 28)).astype(np.uint8)
    y = (np.arange(300) % 10).astype(np.uint8)
    np.savez(tmp_path / "mnist.npz", x_train=x[:240], y_train=y[:240], x_test=x[240:],
             y_test=y[240:])
    base = dict(data_dir=str(tmp_path), anomaly_digit=1, anomaly_split="pooled")
    plain = load_mnist(MnistOptions(**base))
    held = load_mnist(MnistOptions(**base, anomaly_val_digit=2, anomaly_val_fraction=0.2))
    assert torch.equal(plain.test, held.test) and torch.equal(plain.test_labels,
                                                              held.test_labels)
    assert "val" not in plain.extras and held.extras["val"].shape[1:] == (1, 28, 28)
    assert len(held.train) + len(held.extras["val"]) == len(plain.train)
    assert held.extras["val"].min() >= -1 and (held.train_labels != 2).all()


@pytest.mark.parametrize("extra, message", [
    ({"anomaly_val_digit": 1}, "is the test anomaly digit; pick another digit"),
    ({"anomaly_digit": None, "anomaly_val_digit": 2}, "needs data.anomaly_digit"),
])
def test_bad_validation_options_are_named(tmp_path, extra, message):
    x = np.zeros((20, 28, 28), np.uint8)
    y = (np.arange(20) % 10).astype(np.uint8)
    np.savez(tmp_path / "mnist.npz", x_train=x, y_train=y, x_test=x[:5], y_test=y[:5])
    options = {"data_dir": str(tmp_path), "anomaly_digit": 1, **extra}
    with pytest.raises(ConfigError, match=message):
        load_mnist(MnistOptions(**options))
