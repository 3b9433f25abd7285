"""AUPRC / AUROC: a hand-computed example, the sign convention, the protocol, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shortrun.errors import ConfigError
from shortrun.metrics.anomaly import (
    SCORES_FILE,
    auprc,
    auprc_trapezoid,
    auroc,
    heldout_class_eval,
    pr_curve,
)


def test_hand_computed_example():
    # Ranked: 0.9 (anomaly), 0.8 (normal), 0.7 (anomaly), 0.1 (normal).
    # AP = Σ (R_n − R_{n−1}) P_n = 0.5·1 + 0·½ + 0.5·⅔ = 5/6; AUROC = 3 of 4 pairs = 0.75.
    scores, labels = [0.9, 0.8, 0.7, 0.1], [1, 0, 1, 0]
    assert auprc(scores, labels) == pytest.approx(5 / 6)
    assert auroc(scores, labels) == pytest.approx(0.75)
    # The papers' trapezoid over the PR points (R, P) = (0, 1), (½, 1), (½, ½), (1, ⅔), (1, ½):
    # ½·1 + ½·(½ + ⅔)/2 = 19/24 (the trapezoid may fall either side of the step-wise sum).
    assert auprc_trapezoid(scores, labels) == pytest.approx(19 / 24)


def test_higher_score_means_more_anomalous():
    labels = np.array([0] * 50 + [1] * 10)
    scores = labels + 0.01 * np.arange(60)  # anomalies score higher
    assert auprc(scores, labels) == pytest.approx(1.0)
    assert auroc(scores, labels) == pytest.approx(1.0)
    assert auroc(-scores, labels) == pytest.approx(0.0)


def test_random_scores_give_prevalence():
    # AUPRC of uninformative scores estimates the prevalence 0.2; AUROC 0.5. The SE of AUROC
    # with 2000/8000 examples is ≈ √((1/2000 + 1/8000)/12) ≈ 0.0072; tolerances are 4 SE.
    rng = np.random.default_rng(0)
    labels = (np.arange(10_000) < 2000).astype(int)
    scores = rng.standard_normal(10_000)
    assert auroc(scores, labels) == pytest.approx(0.5, abs=4 * 0.0072)
    assert auprc(scores, labels) == pytest.approx(0.2, abs=0.03)
    recall, precision = pr_curve(scores, labels)
    assert recall[0] == 1.0 and len(recall) == len(precision)


def test_heldout_class_protocol_writes_scores(tmp_path):
    x = torch.arange(20.0).reshape(20, 1)
    y = torch.tensor([0, 1] * 10)
    out = heldout_class_eval(lambda b: b[:, 0] * (2 * (b[:, 0] % 2) - 1), x, y, anomaly_class=1,
                             run_dir=tmp_path, batch_size=7)
    assert out["auprc"] == pytest.approx(1.0) and out["auroc"] == pytest.approx(1.0)
    assert out["auprc_trapezoid"] == pytest.approx(1.0)
    assert out["anomaly_n"] == 10
    saved = np.load(tmp_path / SCORES_FILE)
    assert saved["scores"].shape == (20,) and saved["labels"].sum() == 10


@pytest.mark.parametrize("scores, labels, message", [
    ([0.1, 0.2], [0, 1, 1], "2 scores but 3 labels"),
    ([0.1, 0.2], [1, 1], "only one class"),
    ([0.1, 0.2], [0, 2], "must be 0 .normal. or 1 .anomaly."),
    ([0.1, float("nan")], [0, 1], "NaN or inf"),
])
def test_bad_input_is_named(scores, labels, message):
    with pytest.raises(ConfigError, match=message):
        auprc(scores, labels)


def test_protocol_needs_anomaly_class():
    with pytest.raises(ConfigError, match="data.anomaly_digit"):
        heldout_class_eval(lambda b: b[:, 0], torch.zeros(4, 1), torch.zeros(4), None)
