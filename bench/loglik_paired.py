"""Paired comparison of two latent models' test-set log-likelihoods: per-image ``log p(x)`` of
each run on the same first ``--n`` test images, with the settings and seed of
``bench/loglik_table.py`` (so each mean is that script's ``loglik``), and the mean per-image
difference with its standard error over the images (the spread of the differences / √n),
which says how far the difference speaks for the whole test set.

    SHORTRUN_DATA=/work/shared/data OMP_NUM_THREADS=1 .venv/bin/python bench/loglik_paired.py \\
        runs/lebm_ebm runs/lebm_gauss --n 100 --betas 1000 --out paired.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from shortrun.data.registry import load_data
from shortrun.estimators.annealing import AISSettings
from shortrun.estimators.latent import latent_log_likelihood, prior_log_partition
from shortrun.evaluation.likelihood import (
    LOG_Z_SAMPLES,
    N_BETAS,
    N_CHAINS,
    PILOT_BETAS,
    latent_model_of,
)
from shortrun.run import load_run


def per_image(run_dir: Path, n: int, n_betas: int, n_chains: int, seed: int) -> dict:
    """``log p(x)`` of each of the first ``n`` test images, drawn in the order
    :func:`shortrun.log_likelihood` draws them (one batch of at most 100 images)."""
    run = load_run(run_dir)
    run.model.eval()
    x = load_data(run.cfg.data).test[:n]
    lm = latent_model_of(run.model)
    gen = torch.Generator().manual_seed(seed)
    cpu = time.process_time()
    lz = prior_log_partition(lm, LOG_Z_SAMPLES, generator=gen)
    parts = [latent_log_likelihood(lm, x[i: i + 100], n_chains, AISSettings(n_betas=n_betas),
                                   log_z_prior=lz, pilot_betas=PILOT_BETAS, generator=gen)
             for i in range(0, n, 100)]
    log_px = torch.cat([p.log_px for p in parts])
    return {"run": str(run_dir), "step": run.step, "log_px": log_px.tolist(),
            "mean": float(log_px.mean()), "cpu_s": time.process_time() - cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--betas", type=int, default=N_BETAS)
    ap.add_argument("--chains", type=int, default=N_CHAINS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    runs = [per_image(r, a.n, a.betas, a.chains, a.seed) for r in (a.run_a, a.run_b)]
    diff = torch.tensor(runs[0]["log_px"]) - torch.tensor(runs[1]["log_px"])
    out = {"a": runs[0], "b": runs[1], "n": a.n, "betas": a.betas, "chains": a.chains,
           "diff_mean": float(diff.mean()), "diff_sd": float(diff.std()),
           "diff_se": float(diff.std()) / math.sqrt(a.n),
           "a_higher": int((diff > 0).sum())}
    print(json.dumps({k: v for k, v in out.items() if k not in ("a", "b")}))
    if a.out is not None:
        a.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
