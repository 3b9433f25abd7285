"""LEBM anomaly score variants and their evaluation: closed-form relations at one draw."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shortrun.data.base import DataInfo, LoadedData
from shortrun.errors import ConfigError
from shortrun.evaluation import evaluate
from shortrun.metrics.anomaly import SCORES_FILE, auprc, auprc_worst
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

MNIST_INFO = DataInfo((1, 28, 28), "image", -1.0, 1.0, 127.5, 127.5)
SMALL = ["model.nz=4", "model.ngf=2", "model.ndf=8", "model.post_steps=2",
         "eval.batch_size=5"]


def model_and_cfg(*extra: str):
    torch.manual_seed(0)
    cfg = resolve("lebm_mnist_anomaly", [*SMALL, *extra])
    return build_model(cfg, MNIST_INFO), cfg


def draw(m, x, seed=7):
    return m.sample_posterior(x, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("variant", ["joint", "tilt", "unweighted"])
def test_each_variant_is_its_formula_at_the_same_draw(variant):
    m, _ = model_and_cfg(f"model.anomaly_score={variant}", "model.anomaly_llhd_sigma=0.7")
    x = torch.rand(6, 1, 28, 28) * 2 - 1
    z = draw(m, x)
    with torch.no_grad():
        sse = (x - m.generator(z)).flatten(1).pow(2).sum(1)
        prior = z.pow(2).sum(1) / 2 - m.tilt(z).reshape(-1)
        expected = {"joint": sse / (2 * 0.7 ** 2) + prior, "tilt": -m.tilt(z).reshape(-1),
                    "unweighted": sse + prior}[variant]
    got = m.anomaly_score(x, generator=torch.Generator().manual_seed(7))
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_joint_at_the_trained_sigma_is_minus_log_joint():
    m, _ = model_and_cfg()
    x = torch.rand(4, 1, 28, 28) * 2 - 1
    got = m.anomaly_score(x, generator=torch.Generator().manual_seed(3))
    assert torch.equal(got, m.posterior_energy(draw(m, x, 3), x).detach())


def test_tilt_needs_the_ebm_prior():
    m, _ = model_and_cfg("model.prior=gaussian", "model.anomaly_score=tilt")
    with pytest.raises(ConfigError, match="tilt needs the EBM prior.*use joint or unweighted"):
        m.anomaly_score(torch.zeros(2, 1, 28, 28))


def labelled(n, digit, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 28, 28, generator=g) * 2 - 1, torch.arange(n) % 4 + digit - 1


def test_eval_reports_every_variant_and_validation_from_the_same_draws(tmp_path):
    m, cfg = model_and_cfg("model.anomaly_score=unweighted", "data.anomaly_val_digit=3")
    x, y = labelled(16, 1, 0)
    xv, yv = labelled(12, 3, 1)
    data = LoadedData(train=x, test=x, test_labels=y, info=MNIST_INFO,
                      extras={"val": xv, "val_labels": yv})
    out = evaluate(cfg, m, ["auprc"], data=data, run_dir=tmp_path)
    for key in ("auprc", "auprc_trapezoid", "auroc"):
        assert out[key] == out[f"{key}_unweighted"]  # the configured variant
        assert {f"{key}_joint", f"{key}_tilt", f"val_{key}_joint", f"val_{key}_tilt",
                f"val_{key}_unweighted"} <= set(out)
    labels = (y == 1).long()
    assert out["auprc_random"] == out["anomaly_prevalence"] == pytest.approx(4 / 16)
    assert out["auprc_worst"] == pytest.approx(auprc_worst(labels))
    assert out["val_anomaly_n"] == 3 and out["val_auprc_random"] == pytest.approx(3 / 12)
    assert out["anomaly_sigma"] == cfg.model.llhd_sigma
    saved = np.load(tmp_path / SCORES_FILE)
    joint = saved["term_sse"] / (2 * 0.3 ** 2) + saved["term_prior"]
    assert auprc(joint, saved["labels"]) == pytest.approx(out["auprc_joint"])
    val_tilt = saved["val_term_tilt"]
    assert auprc(val_tilt, saved["val_labels"]) == pytest.approx(out["val_auprc_tilt"])


def test_eval_of_a_gaussian_prior_run_skips_tilt_and_refuses_it_as_the_score(tmp_path):
    m, cfg = model_and_cfg("model.prior=gaussian")
    x, y = labelled(8, 1, 0)
    data = LoadedData(train=x, test=x, test_labels=y, info=MNIST_INFO)
    out = evaluate(cfg, m, ["auprc"], data=data)
    assert "auprc_joint" in out and "auprc_tilt" not in out
    cfg.model.anomaly_score = "tilt"
    with pytest.raises(ConfigError, match="needs the EBM prior"):
        evaluate(cfg, m, ["auprc"], data=data)
