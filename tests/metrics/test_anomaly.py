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
    auprc_worst,
    auroc,
    heldout_class_eval,
    inverted_scores,
    pr_curve,
    reference_auprcs,
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


def test_worst_possible_auprc_by_hand():
    # Normals ranked first (n0 = 2), then the anomalies: the k-th anomaly is found at
    # precision k/(n0 + k), so AP = ½(⅓ + 2/4) = 5/12. The trapezoid over the PR points
    # (1, ½), (½, ⅓), (0, 0): ½·(½ + ⅓)/2 + ½·(⅓ + 0)/2 = 7/24.
    labels = [1, 0, 0, 1]
    ref = reference_auprcs(labels)
    assert ref["auprc_worst"] == pytest.approx(5 / 12)
    assert ref["auprc_trapezoid_worst"] == pytest.approx(7 / 24)
    assert ref["auprc_random"] == 0.5
    assert auprc(inverted_scores(labels), labels) == pytest.approx(auprc_worst(labels))


def test_worst_auprc_is_the_minimum_and_matches_the_integral():
    # n0 = 12425 normals, n1 = 7877 anomalies (digit 1 on the pooled split): the mean of
    # k/(n0 + k) is ≈ 1 − (n0/n1) ln(1 + n1/n0) ≈ 0.226, far above 0.
    labels = np.array([1] * 7877 + [0] * 12425)
    worst = auprc_worst(labels)
    assert worst == pytest.approx(1 - 12425 / 7877 * np.log(1 + 7877 / 12425), abs=1e-3)
    rng = np.random.default_rng(1)
    for _ in range(3):  # no ranking goes below it
        assert auprc(rng.standard_normal(labels.size), labels) > worst
    # ties merge into one threshold: a tied inverted score is the prevalence, not the worst
    assert auprc(-labels.astype(float), labels) == pytest.approx(labels.mean())


def test_protocol_reports_the_reference_auprcs():
    x = torch.arange(8.0).reshape(8, 1)
    y = torch.tensor([0, 1, 0, 0, 1, 0, 0, 0])
    out = heldout_class_eval(lambda b: b[:, 0], x, y, anomaly_class=1)
    assert out["auprc_random"] == out["anomaly_prevalence"] == 0.25
    assert out["auprc_worst"] == pytest.approx((1 / 7 + 2 / 8) / 2)
