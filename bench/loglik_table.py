"""Test-set log-likelihood table (issue 41): every trained run in ``RUNS`` scored with
:func:`shortrun.log_likelihood` at the ``eval --metrics loglik`` defaults on the first ``--n``
test images, with the BDMC sandwich on simulated data for latent models, the spread of log Z
over independent runs for data-space EBMs, and the wall and CPU time of each estimate.

    SHORTRUN_DATA=/work/shared/data OMP_NUM_THREADS=1 .venv/bin/python bench/loglik_table.py \\
        runs/lebm_ebm runs/lebm_gauss --n 1000 --out runs/loglik_table.json

Trains nothing: produce the runs first (bench/README.md, issue 41 section, gives the commands).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from shortrun.data.registry import load_data
from shortrun.estimators.bases import GaussianBase
from shortrun.evaluation.likelihood import (
    N_BETAS,
    N_CHAINS,
    N_SIMULATED,
    PIXEL_SCALE,
    log_likelihood,
)
from shortrun.run import load_run


def score(run_dir: Path, n: int, n_betas: int, n_chains: int, n_simulated: int,
          seed: int) -> dict:
    run = load_run(run_dir)
    model, cfg = run.model, run.cfg
    model.eval()
    data = load_data(cfg.data)
    x = data.test[:n]
    base = GaussianBase.fit(data.train[:10_000]) if hasattr(model, "density_energy") else None
    wall, cpu = time.perf_counter(), time.process_time()
    out = log_likelihood(model, x, n_betas=n_betas, n_chains=n_chains, n_simulated=n_simulated,
                         base=base, pixel_scale=PIXEL_SCALE.get(getattr(cfg.data, "scale", "")),
                         generator=torch.Generator().manual_seed(seed))
    out.update({"run": str(run_dir), "recipe": cfg.recipe, "step": run.step,
                "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                "threads": torch.get_num_threads()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--n", type=int, default=1000, help="test images scored")
    ap.add_argument("--betas", type=int, default=N_BETAS)
    ap.add_argument("--chains", type=int, default=N_CHAINS)
    ap.add_argument("--simulated", type=int, default=N_SIMULATED)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="JSON lines appended here")
    a = ap.parse_args()
    for run_dir in a.runs:
        row = score(run_dir, a.n, a.betas, a.chains, a.simulated, a.seed)
        line = json.dumps(row, sort_keys=True)
        print(line, flush=True)
        if a.out is not None:
            with open(a.out, "a") as f:
                f.write(line + "\n")


if __name__ == "__main__":
    main()
