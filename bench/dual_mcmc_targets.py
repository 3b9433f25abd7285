"""The two Dual-MCMC effects of issue 6, measured on a trained run, with their uncertainty.

1. Fréchet distance of EBM-revised samples vs the generator's own (paper §5.2): both sets use
   the *same* z, so the comparison is paired; repeated over ``--seeds`` draws of z.
2. Reconstruction MSE of test images with the inference net + z-chain vs the inference net
   alone (paper Table 3): per-image paired differences, mean ± standard error.

    SHORTRUN_DATA=/work/shared/data .venv/bin/python bench/dual_mcmc_targets.py RUN_DIR \
        --n 1000 --seeds 0 1 2 [--extractor SPEC]

``shortrun eval RUN_DIR --metrics fd,mse`` writes the same numbers (seed ``eval.seed``) to
eval.json; this script adds the repeats and the standard errors.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from shortrun.data.registry import load_data
from shortrun.run import load_run


def paired_mse(model, x: torch.Tensor, batch: int) -> tuple[float, float, float, float]:
    """Per-pixel MSE without and with the z-chain, and the mean ± SE of the per-image gap."""
    a, b = [], []
    for i in range(0, len(x), batch):
        xb = x[i : i + batch]
        a.append(((model.reconstruct(xb, chain=False) - xb) ** 2).flatten(1).mean(1))
        b.append(((model.reconstruct(xb, chain=True) - xb) ** 2).flatten(1).mean(1))
    inf, chain = torch.cat(a).double(), torch.cat(b).double()
    gap = inf - chain
    return (float(inf.mean()), float(chain.mean()), float(gap.mean()),
            float(gap.std() / math.sqrt(len(gap))))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--n", type=int, default=1000, help="samples for FD / test images for MSE")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--extractor", default=None, help="eval.extractor (default: per dataset)")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    overrides = [f"eval.n_samples={args.n}"]
    if args.extractor:
        overrides.append(f"eval.extractor={args.extractor}")
    run = load_run(args.run_dir, overrides)
    data = load_data(run.cfg.data)
    model = run.model
    print(f"run {args.run_dir} at step {run.step}; data {run.cfg.data.name}\n")
    torch.manual_seed(0)
    inf, chain, gap, se = paired_mse(model, data.test[: args.n], run.cfg.eval.batch_size)
    print(f"MSE per pixel on [-1, 1], {min(args.n, len(data.test))} test images: inference "
          f"net {inf:.5f}, + z-chain {chain:.5f}; gap {gap:.5f} ± {se:.5f} (SE), "
          f"{gap / se:.1f} SE\n")
    print("| seed | fd_generator | fd_revised | revised − generator |")
    print("|---|---|---|---|")
    diffs = []
    for seed in args.seeds:
        torch.manual_seed(seed)
        out = model.evaluate(["fd"], data, args.run_dir, run.cfg)
        diffs.append(out["fd_revised"] - out["fd_generator"])
        print(f"| {seed} | {out['fd_generator']:.3f} | {out['fd_revised']:.3f} | "
              f"{diffs[-1]:+.3f} |", flush=True)
    mean = sum(diffs) / len(diffs)
    if len(diffs) > 1:
        sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
        print(f"\nmean FD change {mean:+.3f} ± {sd / math.sqrt(len(diffs)):.3f} (SE over "
              f"{len(diffs)} seeds); extractor {out['fd_extractor']}, n={args.n} vs "
              f"{out['fd_n_ref']} test images")


if __name__ == "__main__":
    main()
