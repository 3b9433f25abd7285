"""LEBM eval metrics on inputs with a known answer."""

from __future__ import annotations

import pytest
import torch

from shortrun.data.base import DataInfo, LoadedData
from shortrun.evaluation import evaluate
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

MNIST_INFO = DataInfo((1, 28, 28), "image", -1.0, 1.0, 127.5, 127.5)


def test_mse_is_per_pixel_over_the_whole_test_split(monkeypatch, tmp_path):
    """A reconstruction that is the image plus 0.1 everywhere (and 0.3 on one pixel) has
    per-pixel MSE (0.1²·783 + 0.3²) / 784, whatever the images and the batch size."""
    torch.manual_seed(0)
    cfg = resolve("lebm_mnist", ["model.nz=4", "model.ngf=2", "model.ndf=8",
                                 "eval.batch_size=3"])
    model = build_model(cfg, MNIST_INFO)
    bump = torch.full((1, 28, 28), 0.1)
    bump[0, 5, 7] = 0.3
    monkeypatch.setattr(model, "reconstruct", lambda x, *a, **k: x + bump)
    test = torch.rand(7, 1, 28, 28) * 2 - 1
    out = evaluate(cfg, model, ["mse"], data=LoadedData(train=test, test=test, info=MNIST_INFO),
                   run_dir=tmp_path)
    assert out["mse"] == pytest.approx((0.01 * 783 + 0.09) / 784, rel=1e-5)
