"""Which term of the LEBM anomaly score ranks the held-out digit (Pang et al. 2020, §5.4).

The paper's score is ``−log p(x, z) = ‖x − g(z)‖²/(2σ²) − f_α(z) + ‖z‖²/(2σ_p²)`` at one
posterior sample ``z``. This script draws that sample once per test image of a trained
``lebm_mnist_anomaly`` run and reports, for each term alone and for the joint score with the
reconstruction term weighted as if σ were ``σ'``, the mean over normals and anomalies, the
trapezoid AUPRC (the papers' formula) and the AUROC. It changes nothing in the model: ``σ'``
only re-weights the terms of the one sample, so the rows are a diagnosis, not other models.

    SHORTRUN_DATA=/work/shared/data .venv/bin/python bench/lebm_anomaly_terms.py RUN_DIR \
        [--sigmas 0.3,0.5,1,2] [--threads 2] [--post-steps K]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from shortrun.data.registry import load_data
from shortrun.metrics.anomaly import auprc_trapezoid, auroc
from shortrun.run import load_run


@torch.no_grad()
def score_terms(run_dir: Path, post_steps: int | None = None, batch: int = 500,
                ) -> tuple[dict[str, torch.Tensor], torch.Tensor, float]:
    """Per test image: squared reconstruction error, ``−f_α(z)`` and ``‖z‖²/(2σ_p²)``, at one
    posterior sample (``post_steps`` Langevin steps; default the run's ``eval_post_steps``)."""
    loaded = load_run(run_dir, [f"model.eval_post_steps={post_steps}"] if post_steps else None)
    model, cfg = loaded.model, loaded.cfg
    if getattr(cfg.data, "anomaly_digit", None) is None:
        raise SystemExit(f"{run_dir}: not an anomaly run (data.anomaly_digit is unset); train "
                         "it with the lebm_mnist_anomaly recipe")
    data = load_data(cfg.data)
    x, y = data.test, data.test_labels
    labels = (y.reshape(-1) == cfg.data.anomaly_digit).long()
    sse, tilt, gauss = [], [], []
    for i in range(0, len(x), batch):
        xb = x[i: i + batch].to(model.device)
        z = model.sample_posterior(xb, cfg.model.eval_post_steps)
        sse.append((xb - model.generator(z)).flatten(1).pow(2).sum(1))
        tilt.append(-model.tilt(z).reshape(-1) if model.tilt is not None
                    else torch.zeros(len(xb)))
        gauss.append(z.pow(2).sum(1) / (2 * cfg.model.prior_sigma ** 2))
    terms = {k: torch.cat(v).double().cpu()
             for k, v in (("sse", sse), ("tilt", tilt), ("gauss", gauss))}
    return terms, labels, cfg.model.llhd_sigma


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--sigmas", default="0.3,0.5,0.7,1,1.5,2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--post-steps", type=int, default=None,
                    help="posterior Langevin steps (default: the run's model.eval_post_steps)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    terms, labels, sigma = score_terms(args.run_dir, args.post_steps)
    sse, tilt, gauss = terms["sse"], terms["tilt"], terms["gauss"]
    rows = [("‖x − g(z)‖² alone", sse), ("−f_α(z) alone (tilt)", tilt),
            ("‖z‖²/(2σ_p²) alone", gauss), ("prior −log p_α(z) (tilt + Gaussian)", tilt + gauss)]
    rows.append((f"joint, trained σ = {sigma:g} (the paper's score)",
                 sse / (2 * sigma ** 2) + tilt + gauss))
    for s in (float(v) for v in args.sigmas.split(",")):
        rows.append((f"joint, reconstruction weighted as σ' = {s:g}",
                     sse / (2 * s ** 2) + tilt + gauss))
    print(f"prevalence (AUPRC of a random score): {float(labels.double().mean()):.3f}")
    print("| score | mean, normals | mean, anomalies | AUPRC (trapezoid) | AUROC |")
    print("|---|---|---|---|---|")
    for name, s in rows:
        print(f"| {name} | {float(s[labels == 0].mean()):.2f} | {float(s[labels == 1].mean()):.2f} "
              f"| {auprc_trapezoid(s, labels):.3f} | {auroc(s, labels):.3f} |")


if __name__ == "__main__":
    main()
