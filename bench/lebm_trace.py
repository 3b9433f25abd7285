"""Long-run prior chain of a trained LEBM with the prior energy logged along it (the paper's
transition analysis, §5.5): prints E_α every ``--every`` steps and saves x = g(z) at the end.

    .venv/bin/python bench/lebm_trace.py RUN_DIR --steps 2000 --every 250 --out long.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from shortrun.plotting import save_samples
from shortrun.run import load_run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--every", type=int, default=250)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = load_run(args.run_dir).model
    trace = model.energy_trace(args.n, args.steps, args.every)
    print("| step | mean E_α(z) | std |")
    print("|---|---|---|")
    for k, e, s in zip(trace["step"], trace["energy"], trace["energy_std"], strict=True):
        print(f"| {k} | {e:.3f} | {s:.3f} |")
    if args.out:
        torch.manual_seed(0)
        save_samples(model.sample(args.n, steps=args.steps), model.info, args.out)


if __name__ == "__main__":
    main()
