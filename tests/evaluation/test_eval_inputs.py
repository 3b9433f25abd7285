"""What each eval number is computed from: which split, which chain length, which reference
and which real images (shortrun/evaluation/lebm.py and provenance.py docstrings).

Every image here carries its identity in its pixel value, the splits use disjoint values, and
the stand-in networks report what they were given, so a number computed from the wrong split,
the wrong chain length or the wrong images comes out different. The expected numbers are
closed forms (per-pixel MSE of constant images, average precision of a known ranking, the
1-D Fréchet distance ``(m₁ − m₂)² + (s₁ − s₂)²``), never the function under test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shortrun.data.base import DataInfo, LoadedData
from shortrun.evaluation import evaluate
from shortrun.evaluation import features as features_module
from shortrun.evaluation.provenance import CACHE_ENV
from shortrun.metrics.features import Extractor
from shortrun.models.registry import build_model
from shortrun.train.config import build_config, resolve

MNIST_INFO = DataInfo((1, 28, 28), "image", -1.0, 1.0, 127.5, 127.5)
SMALL = ["model.nz=4", "model.ngf=2", "model.ndf=8", "model.post_steps=3",
         "model.eval_post_steps=7", "eval.batch_size=4"]


def constant_images(values, shape=(1, 28, 28)) -> torch.Tensor:
    v = torch.as_tensor(values, dtype=torch.float32)
    return v.view(-1, *[1] * len(shape)).expand(-1, *shape).clone()


def lebm(recipe: str, *extra: str):
    torch.manual_seed(0)
    cfg = resolve(recipe, [*SMALL, *extra])
    return cfg, build_model(cfg, MNIST_INFO)


# ------------------------------------------------------------------------------ mse
def test_mse_reconstructs_the_test_split_with_eval_post_steps(monkeypatch, tmp_path):
    """The stand-in reconstruction is the constant ``0.01 · steps``: the MSE is the mean of
    ``(x − 0.07)²`` over the test split at eval_post_steps = 7 (post_steps = 3 gives 0.03;
    the training split, all at 0.9, gives another number)."""
    cfg, model = lebm("lebm_mnist")
    seen: list[tuple[torch.Tensor, object]] = []

    def reconstruct(x, steps=None, generator=None):
        seen.append((x.clone(), steps))
        return torch.full_like(x, 0.01 * steps)

    monkeypatch.setattr(model, "reconstruct", reconstruct)
    test_values = torch.linspace(-0.5, 0.5, 10)
    data = LoadedData(train=constant_images([0.9] * 12), info=MNIST_INFO,
                      test=constant_images(test_values))
    out = evaluate(cfg, model, ["mse"], data=data, run_dir=tmp_path)
    assert out["mse"] == pytest.approx(float(((test_values - 0.07) ** 2).mean()), rel=1e-5)
    assert {steps for _, steps in seen} == {7}
    assert torch.equal(torch.cat([x for x, _ in seen]), data.test)


# ------------------------------------------------------------------------------ auprc
# test split: values 0.1 … 1.0; the anomaly digit 3 at the two highest → AP 1 (5 at the lowest)
TEST_VALUES = [0.1 * (i + 1) for i in range(10)]
TEST_LABELS = [5, 0, 1, 2, 4, 6, 7, 8, 3, 3]
# validation split: values 1.0 … 0.1; its digit 5 at 1.0 and 0.5 → AP (1 + 2/6)/2 = 2/3
# (3 at the lowest: scoring it with the test digit would give 0.1)
VAL_VALUES = [1.0 - 0.1 * i for i in range(10)]
VAL_LABELS = [5, 0, 1, 2, 4, 5, 6, 7, 8, 3]


def anomaly_data() -> LoadedData:
    train = constant_images([0.0] * 12)
    return LoadedData(train=train, info=MNIST_INFO, test=constant_images(TEST_VALUES),
                      test_labels=torch.tensor(TEST_LABELS), train_labels=torch.zeros(12),
                      extras={"val": constant_images(VAL_VALUES),
                              "val_labels": torch.tensor(VAL_LABELS)})


def test_test_and_validation_numbers_come_from_their_own_split_digit_and_chain(monkeypatch,
                                                                                tmp_path):
    """The stand-in score is the image's value at eval_post_steps and its negative at any
    other chain length (which would turn AP 1 into the worst ranking's (1/9 + 2/10)/2)."""
    cfg, model = lebm("lebm_mnist_anomaly", "data.anomaly_digit=3", "data.anomaly_val_digit=5")
    seen: list[tuple[float, object]] = []

    def anomaly_terms(x, steps=None, generator=None):
        value = x.flatten(1).mean(1)
        seen.extend((float(v), steps) for v in value)
        sign = 1.0 if steps == 7 else -1.0
        zeros = torch.zeros_like(value)
        return {"sse": sign * value, "prior": zeros, "tilt": sign * value}

    monkeypatch.setattr(model, "anomaly_terms", anomaly_terms)
    out = evaluate(cfg, model, ["auprc"], data=anomaly_data(), run_dir=tmp_path)
    assert {steps for _, steps in seen} == {7}
    assert sorted(round(v, 4) for v, _ in seen) == sorted(
        round(v, 4) for v in TEST_VALUES + VAL_VALUES)
    assert out["auprc"] == pytest.approx(1.0)
    assert out["auprc_joint"] == pytest.approx(1.0)
    assert out["val_auprc_joint"] == pytest.approx(2 / 3)
    assert out["val_auprc_unweighted"] == pytest.approx(2 / 3)
    assert out["val_auprc_tilt"] == pytest.approx(2 / 3)
    # the score file holds the test split's scores (joint at σ′) in its order, its labels,
    # and the validation terms beside them
    saved = np.load(tmp_path / "eval_scores.npz")
    sigma = model.anomaly_sigma
    assert np.allclose(saved["scores"], np.array(TEST_VALUES) / (2 * sigma ** 2))
    assert saved["labels"].tolist() == [int(d == 3) for d in TEST_LABELS]
    assert np.allclose(saved["val_term_sse"], VAL_VALUES)
    assert saved["val_labels"].tolist() == [int(d == 5) for d in VAL_LABELS]


# ------------------------------------------------------------------------------ FD
INFO = DataInfo(shape=(1, 4, 4), kind="image", low=-1.0, high=1.0)
N_TRAIN, N_SAMPLES = 400, 60
# identities: training image i is the constant (i + 0.5)/N_TRAIN − 1 ∈ (−1, 0); test images
# lie in (0, 0.5), generated ones in (0.5, 1): the extractor sees which is which
TRAIN_CODES = (torch.arange(N_TRAIN) + 0.5) / N_TRAIN - 1.0
TEST_CODES = torch.linspace(0.05, 0.45, 90) ** 1.5


def fd_1d(a: np.ndarray, b: np.ndarray) -> float:
    """Fréchet distance of two 1-D Gaussians fitted with the unbiased variance. Compared within
    1e-7 absolute: the library takes a matrix square root of float32 features' covariances."""
    return float((a.mean() - b.mean()) ** 2 + (a.std(ddof=1) - b.std(ddof=1)) ** 2)


def run_fd(monkeypatch, tmp_path, seed: int, with_test: bool = True):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / f"cache{seed}{with_test}"))
    seen: list[torch.Tensor] = []

    def net(x):  # a plain function: no weights, so the floor is never cached
        value = x.flatten(1).mean(1, keepdim=True)
        seen.append(value.reshape(-1).clone())
        return value

    extractor = Extractor("identity-mean", net, 1, INFO)
    monkeypatch.setattr(features_module, "run_extractor", lambda cfg: extractor)
    gen = torch.Generator().manual_seed(1)

    class Model:
        name, info = "lebm", INFO

        def sample(self, n):
            return constant_images(0.5 + 0.5 * torch.rand(n, generator=gen), (1, 4, 4))

    cfg = build_config({"data": {"name": "digits"}, "model": {"name": "classifier"},
                        "train": {"steps": 1},
                        "eval": {"n_samples": N_SAMPLES, "batch_size": 25, "seed": seed}})
    data = LoadedData(train=constant_images(TRAIN_CODES, (1, 4, 4)), info=INFO,
                      test=constant_images(TEST_CODES, (1, 4, 4)) if with_test else None)
    out = features_module.model_fd_kid(Model(), data, cfg, ("fd",))
    values = torch.cat(seen).numpy()
    return out, {"train": values[values < 0], "test": values[(values > 0) & (values < 0.5)],
                 "generated": values[values > 0.5]}


def train_indices(values: np.ndarray) -> np.ndarray:
    return np.rint((values + 1.0) * N_TRAIN - 0.5).astype(int)


def test_the_fd_floor_is_a_random_subset_of_the_training_split_against_the_test_split(
        monkeypatch, tmp_path):
    out, seen = run_fd(monkeypatch, tmp_path, seed=3)
    floor_real = seen["train"]
    idx = train_indices(floor_real)
    # the floor's real images: fd_n distinct training images, drawn across the whole split
    assert len(idx) == out["fd_n"] == out["fd_floor_n"] == N_SAMPLES
    assert len(set(idx.tolist())) == N_SAMPLES and idx.max() >= N_SAMPLES
    assert not np.array_equal(np.sort(idx), np.arange(N_SAMPLES))  # not the first n
    assert idx.min() < N_TRAIN // 4 and idx.max() >= 3 * N_TRAIN // 4  # spread over the split
    # the reference is the whole test split, once for the model's FD and the floor
    test_feats = TEST_CODES.numpy()
    assert np.allclose(np.sort(seen["test"]), np.sort(test_feats), atol=1e-6)
    assert out["fd_reference"] == "test" and out["fd_n_ref"] == len(TEST_CODES)
    assert out["fd_floor"] == pytest.approx(fd_1d(floor_real, test_feats), rel=1e-6, abs=1e-7)
    assert out["fd"] == pytest.approx(fd_1d(seen["generated"], test_feats), rel=1e-6, abs=1e-7)
    # the same seed draws the same subset; another seed another one
    again, seen_again = run_fd(monkeypatch, tmp_path, seed=3)
    assert np.array_equal(train_indices(seen_again["train"]), idx)
    assert again["fd_floor"] == out["fd_floor"]
    other, seen_other = run_fd(monkeypatch, tmp_path, seed=4)
    assert set(train_indices(seen_other["train"]).tolist()) != set(idx.tolist())


def test_without_a_test_split_the_reference_is_the_training_split(monkeypatch, tmp_path):
    out, seen = run_fd(monkeypatch, tmp_path, seed=3, with_test=False)
    assert out["fd_reference"] == "train" and out["fd_n_ref"] == N_TRAIN
    train_values = seen["train"]
    # the reference pass (all N_TRAIN images) and the floor's N_SAMPLES draws
    assert len(train_values) == N_TRAIN + N_SAMPLES
    reference, floor_real = train_values[:N_TRAIN], train_values[N_TRAIN:]
    assert np.allclose(np.sort(reference), np.sort(TRAIN_CODES.numpy()), atol=1e-6)
    assert out["fd"] == pytest.approx(fd_1d(seen["generated"], reference), rel=1e-6, abs=1e-7)
    assert out["fd_floor"] == pytest.approx(fd_1d(floor_real, reference), rel=1e-6, abs=1e-7)
