"""The LEBM prior ablation on MNIST (Pang et al. 2020, §5.2 / Table 5): the same generator,
data order and budget with ``model.prior=ebm`` and ``model.prior=gaussian``, compared on
sample Fréchet distance and test reconstruction MSE.

For every seed it trains the pair, or reuses runs already in ``--out``. It then reports:

- ``fd``, via ``shortrun eval --metrics fd``;
- the per-image reconstruction MSE of the 10,000 test images. The MSE comes from one
  K1-step posterior chain per image, with the same seed for both models. The table gives
  the paired difference EBM − Gaussian ± its standard error over images.

    SHORTRUN_DATA=/work/shared/data .venv/bin/python bench/lebm_ablation.py --seeds 1 2 \\
        --steps 3600 --out /tmp/abl
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import torch

from shortrun.data.registry import load_data
from shortrun.run import load_run


def shortrun(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "shortrun", *args], check=True)


def per_image_mse(run_dir: Path, seed: int) -> torch.Tensor:
    run = load_run(run_dir)
    model, cfg = run.model, run.cfg
    data = load_data(cfg.data)
    torch.manual_seed(seed)
    steps, bs = cfg.model.eval_post_steps, cfg.eval.batch_size
    out = []
    for i in range(0, data.test.shape[0], bs):
        x = data.test[i: i + bs]
        out.append((x - model.reconstruct(x, steps)).detach().flatten(1).pow(2).mean(1))
    return torch.cat(out).double()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--out", type=Path, default=Path("runs/lebm_ablation"))
    args = ap.parse_args()
    rows = []
    for seed in args.seeds:
        runs = {}
        for prior in ("ebm", "gaussian"):
            run = args.out / f"s{seed}_{prior}"
            if not (run / "checkpoints").is_dir():
                shortrun("train", "lebm_mnist", f"--set=model.prior={prior}",
                         f"--set=train.seed={seed}", f"--set=train.steps={args.steps}",
                         "--set=train.progress=false", "--out", str(run))
            if not (run / "eval.json").is_file() or "fd" not in json.loads(
                    (run / "eval.json").read_text()):
                shortrun("eval", str(run), "--metrics", "fd")
            runs[prior] = run
        fd = {p: json.loads((r / "eval.json").read_text())["fd"] for p, r in runs.items()}
        mse = {p: per_image_mse(r, seed=0) for p, r in runs.items()}
        diff = mse["ebm"] - mse["gaussian"]
        se = float(diff.std()) / math.sqrt(diff.numel())
        rows.append(f"| {seed} | {args.steps} | {fd['ebm']:.2f} | {fd['gaussian']:.2f} | "
                    f"{float(mse['ebm'].mean()):.5f} | {float(mse['gaussian'].mean()):.5f} | "
                    f"{float(diff.mean()):+.5f} ± {se:.5f} |")
    print("| seed | steps | FD EBM | FD Gaussian | MSE EBM | MSE Gaussian "
          "| MSE EBM − Gaussian ± SE |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
