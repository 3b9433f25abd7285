"""Expected calibration error on cases whose value is known by hand (Guo et al. 2017, Eq. 3)."""

from __future__ import annotations

import pytest
import torch

from shortrun.metrics.calibration import expected_calibration_error, reliability


def two_class(conf: list[float]) -> torch.Tensor:
    c = torch.tensor(conf, dtype=torch.float64)
    return torch.stack([c, 1 - c], 1)  # class 0 is the prediction when conf > 0.5


def test_ece_of_a_constructed_case():
    """4 predictions at confidence 0.6 with 2 right, 6 at 0.95 all right:
    ECE = 0.4·|0.5 − 0.6| + 0.6·|1 − 0.95| = 0.07."""
    probs = two_class([0.6] * 4 + [0.95] * 6)
    labels = torch.tensor([0, 0, 1, 1] + [0] * 6)
    rel = reliability(probs, labels, n_bins=15)
    assert rel.ece == pytest.approx(0.07, abs=1e-12)
    assert sum(rel.count) == 10 and rel.count[8] == 4 and rel.count[14] == 6
    assert rel.accuracy[8] == pytest.approx(0.5) and rel.confidence[14] == pytest.approx(0.95)


def test_ece_is_zero_when_accuracy_matches_confidence_and_the_gap_otherwise():
    probs = two_class([0.8] * 10)
    right = torch.tensor([0] * 8 + [1] * 2)
    assert expected_calibration_error(probs, right) == pytest.approx(0.0, abs=1e-12)
    over = torch.tensor([0] * 5 + [1] * 5)  # 50 % right at 80 % confidence
    assert expected_calibration_error(probs, over) == pytest.approx(0.3, abs=1e-12)


def test_a_confidence_on_a_bin_edge_goes_to_the_lower_bin():
    rel = reliability(two_class([2 / 3] * 3), torch.zeros(3, dtype=torch.long), n_bins=3)
    assert rel.count == [0, 3, 0]


def test_bad_inputs_say_what_was_expected():
    with pytest.raises(ValueError, match=r"expected probabilities \(N, K\) and N labels"):
        reliability(torch.ones(4), torch.zeros(4))
    with pytest.raises(ValueError, match=r"n_bins must be >= 1"):
        reliability(two_class([0.7]), torch.zeros(1, dtype=torch.long), n_bins=0)


def test_reliability_summary_counts_over_and_under_confident_bins_and_the_largest_gap():
    """The eval table's one line: bins 8 (conf 0.6, acc 0.5: over), 10 (conf 0.7, acc 0.9:
    under) and 14 (conf 0.95, acc 1.0: under) are filled; the largest gap is 0.2 at 0.7."""
    from shortrun.metrics.calibration import reliability_summary

    confidence, accuracy, count = [0.0] * 15, [0.0] * 15, [0] * 15
    for b, c, a, n in ((8, 0.6, 0.5, 4), (10, 0.7, 0.9, 10), (14, 0.95, 1.0, 6)):
        confidence[b], accuracy[b], count[b] = c, a, n
    line = reliability_summary(confidence, accuracy, count)
    assert line == ("15 bins, 3 filled: 1 over-, 2 under-confident; max gap 0.2 at "
                    "confidence 0.7")
    assert reliability_summary([0.0] * 3, [0.0] * 3, [0] * 3) == "3 bins, 0 filled"
