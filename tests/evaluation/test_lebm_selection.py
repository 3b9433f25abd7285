"""Anomaly selection: validation only, closed-form cases where the best choice is known."""

from __future__ import annotations

import pytest
import torch

from shortrun.errors import ConfigError
from shortrun.evaluation.lebm_selection import select, variant_scores


def terms_where(sse, prior, tilt):
    return {"sse": torch.tensor(sse, dtype=torch.float64),
            "prior": torch.tensor(prior, dtype=torch.float64),
            "tilt": torch.tensor(tilt, dtype=torch.float64)}


LABELS = torch.tensor([1, 1, 0, 0])


def test_sigma_is_chosen_where_the_reconstruction_stops_hiding_the_prior():
    # The anomalies reconstruct better (smaller sse) but their prior energy is higher: at a
    # small σ′ the reconstruction decides (inverted ranking), at a large σ′ the prior does.
    terms = terms_where(sse=[1.0, 1.1, 4.0, 4.2], prior=[3.0, 3.0, 0.0, 0.0],
                        tilt=[2.0, 2.0, 0.0, 0.0])
    got = select({10: (terms, LABELS)}, trained_sigma=0.3, sigmas=(0.3, 3.0))
    # σ = 0.3: joint = sse/0.18 + prior → anomalies 8.6 < normals 22.2: AP = worst = 5/12
    assert got["joint"].sigma == 0.3 and got["joint"].val_auprc == pytest.approx(5 / 12)
    # σ′ = 3: joint = sse/18 + prior → anomalies 3.06 > normals 0.22: perfect
    assert got["joint_sigma"].sigma == 3.0 and got["joint_sigma"].val_auprc == 1.0
    assert got["tilt"].val_auprc == 1.0 and got["tilt"].sigma is None
    # unweighted = sse + prior: 4.2 (normal), 4.1, then a tie at 4.0: AP = ½·½ + ½·½
    assert got["unweighted"].val_auprc == pytest.approx(0.5)


def test_the_checkpoint_with_the_best_validation_ap_wins_earliest_on_ties():
    good = terms_where([1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0])
    bad = terms_where([0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 1, 1])
    got = select({500: (bad, LABELS), 1000: (good, LABELS), 1500: (good, LABELS)},
                 trained_sigma=1.0, variants=("joint", "tilt"))
    assert got["joint"].step == 1000 and got["tilt"].step == 1000


def test_variant_scores_are_the_model_formulas():
    t = terms_where([2.0], [1.0], [0.5])
    assert float(variant_scores(t, "joint_sigma", 0.5)) == pytest.approx(2 / 0.5 + 1)
    assert float(variant_scores(t, "unweighted", None)) == 3.0
    assert float(variant_scores(t, "tilt", None)) == 0.5


def test_nothing_to_select_on_is_named():
    with pytest.raises(ConfigError, match="data.anomaly_val_digit"):
        select({}, trained_sigma=0.3)
