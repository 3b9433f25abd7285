"""Reference floors: FD / KID of real training images against the test split, per extractor and n.

A perfect generator scores about this at that n (FD is biased upward by ~Tr Σ / n), so model
numbers are read against it. Each row is exactly what

    SHORTRUN_DATA=/work/shared/data shortrun eval runs/features/NAME \
        --metrics fd_floor,kid_floor --set eval.n_samples=N

prints: N images drawn at random (seed eval.seed = 0) from the training split against the whole
test split, through the classifier's penultimate features — the same comparison a model's
fd/kid makes with N generated samples.

Usage: SHORTRUN_DATA=... python bench/eval_floors.py [runs/features/mnist runs/features/fashion]
"""

from __future__ import annotations

import sys
import time

import torch

from shortrun.data.registry import load_data
from shortrun.run import load_run


def main(run_dirs: list[str]) -> None:
    torch.set_num_threads(1)
    print("| extractor | n | n_ref | FD floor | KID floor (× 10³) | seconds |")
    print("|---|---|---|---|---|---|")
    for run_dir in run_dirs:
        run = load_run(run_dir)
        data = load_data(run.cfg.data)
        for n in (1000, 5000, 10000):
            run.cfg.eval.n_samples = n
            t = time.perf_counter()
            out = run.model.evaluate(["fd_floor", "kid_floor"], data, run_dir, run.cfg)
            secs = time.perf_counter() - t
            print(f"| {run.cfg.recipe} ({run_dir}) | {out['fd_floor_n']} | "
                  f"{out['fd_floor_n_ref']} | "
                  f"{out['fd_floor']:.4f} | {1e3 * out['kid_floor']:.3f} ± "
                  f"{1e3 * out['kid_floor_std']:.3f} | {secs:.1f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["runs/features/mnist", "runs/features/fashion"])
