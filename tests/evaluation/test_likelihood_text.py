"""The text LEBM's NLL moved onto the latent models' AIS estimator: on a tiny untrained model
with an EBM prior it agrees with the earlier importance-sampled ``LEBMText.log_px`` (run with
many samples) within 3 combined standard errors, sentence by sentence."""

from __future__ import annotations

import math

import torch

from shortrun.data.base import DataInfo
from shortrun.data.ptb import BOS_ID, EOS_ID, PAD_ID
from shortrun.estimators.annealing import AISSettings
from shortrun.estimators.latent import latent_log_likelihood, prior_log_partition
from shortrun.evaluation.likelihood import latent_model_of
from shortrun.evaluation.text import text_nll
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

V, L = 12, 8
INFO = DataInfo((L,), "text", 0.0, float(V - 1))
TINY = ["model.nz=4", "model.emb=6", "model.hidden=8", "model.ndf=8", "model.prior_steps=4",
        "model.post_steps=10", "model.nll_chains=32", "model.nll_samples=500",
        "model.log_z_samples=20000"]
BATCH = torch.tensor([[BOS_ID, 5, 7, 3, EOS_ID, PAD_ID, PAD_ID, PAD_ID],
                      [BOS_ID, 4, EOS_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID],
                      [BOS_ID, 9, 9, 10, 11, 6, 8, EOS_ID]])


def test_ais_nll_agrees_with_the_importance_sampled_nll_within_error():
    torch.manual_seed(0)
    cfg = resolve("lebm_ptb_small", TINY)
    model = build_model(cfg, INFO)
    lm = latent_model_of(model)
    torch.manual_seed(1)
    lz = prior_log_partition(lm, 20_000)
    est = latent_log_likelihood(lm, BATCH, 16, AISSettings(n_betas=100), log_z_prior=lz,
                                generator=torch.Generator().manual_seed(2))
    # the earlier estimator, 4 independent repeats for its own standard error
    reps = torch.stack([model.log_px(BATCH, lz.log_z, torch.Generator().manual_seed(s))
                        for s in range(4)]).detach()
    old, old_se = reps.mean(0), reps.std(0) / 2
    se = torch.sqrt(est.stderr ** 2 + old_se ** 2)
    assert bool(((est.log_px - old).abs() < 3 * se + 1e-3).all()), (est.log_px - old, se)
    out = text_nll(model, cfg, BATCH, n_betas=50)
    assert out["nll_sentences"] == 3.0 and out["nll_se"] > 0
    assert math.isclose(out["nll_log_z"], lz.log_z, abs_tol=4 * lz.stderr + 0.02)
    assert abs(out["nll"] + float(old.mean())) < 3 * out["nll_se"] + 3 * float(old_se.max())
