"""DAMC (Yu et al. 2023) against the 2020 short-run prior (Pang et al.) on MNIST at the same
wall-clock budget: ``damc_mnist`` vs ``lebm_mnist`` (same generator, EBM, data and optimiser;
only the chains' start and length and the amortizer differ).

For every seed and both recipes it

1. times ``--calibrate`` training iterations in this process (after one warm-up) at
   ``--threads`` threads: the per-iteration cost;
2. trains the recipe for ``budget / cost`` iterations (so both get the same wall-clock
   budget), or reuses a finished run in ``--out``;
3. evaluates ``fd`` (the library's MNIST classifier extractor) and ``mse`` (test
   reconstruction) with ``shortrun eval`` (``--metrics`` chooses).

It prints one row per seed and a mean ± std row, with the CPU model, its flags summary and the
torch version.

    SHORTRUN_DATA=/work/shared/data python bench/damc_compare.py --seeds 1 2 3 \\
        --budget-s 1800 --out runs/damc_compare
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from shortrun.data.registry import load_data
from shortrun.hardware import cpu_flags, cpu_model
from shortrun.models.base import OptimOptions
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

RECIPES = {"langevin": "lebm_mnist", "damc": "damc_mnist"}


def seconds_per_iteration(recipe: str, overrides: list[str], n: int, threads: int) -> float:
    """Mean wall-clock seconds of one training iteration (after one warm-up)."""
    torch.set_num_threads(threads)
    cfg = resolve(recipe, overrides)
    data = load_data(cfg.data)
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg, data.info)
    opts = model.configure_training(OptimOptions.from_train(cfg.train))
    bs = cfg.train.batch_size
    model.training_step(data.train[:bs], 0, opts)
    start = time.perf_counter()
    for k in range(1, n + 1):
        i = (k * bs) % (data.train.shape[0] - bs)
        model.training_step(data.train[i: i + bs], k, opts)
    return (time.perf_counter() - start) / n


def shortrun(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "shortrun", *args], check=True)


def train_and_eval(recipe: str, run: Path, seed: int, steps: int, threads: int,
                   overrides: list[str], metrics: list[str]) -> dict[str, float]:
    if not (run / "checkpoints").is_dir():
        sets = [f"--set={o}" for o in overrides]
        shortrun("train", recipe, f"--set=train.seed={seed}", f"--set=train.steps={steps}",
                 f"--set=train.threads={threads}", "--set=train.progress=false", *sets,
                 "--out", str(run))
    got = json.loads((run / "eval.json").read_text()) if (run / "eval.json").is_file() else {}
    if not set(metrics) <= set(got):
        shortrun("eval", str(run), "--metrics", ",".join(metrics))
        got = json.loads((run / "eval.json").read_text())
    return {k: float(got[k]) for k in metrics}


def mean_std(xs: list[float]) -> str:
    return f"{statistics.mean(xs):.4g} ± {statistics.stdev(xs):.2g}" if len(xs) > 1 \
        else f"{xs[0]:.4g}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--budget-s", type=float, default=1800.0,
                    help="wall-clock training budget per run, seconds")
    ap.add_argument("--calibrate", type=int, default=5, help="iterations timed per recipe")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="extra KEY=VALUE for both recipes (e.g. data.n_train=10000)")
    ap.add_argument("--metrics", default="fd,mse",
                    help="fd needs the MNIST classifier extractor (shortrun train "
                         "classifier_mnist --out runs/features/mnist, or --set eval.extractor=RUN)")
    ap.add_argument("--out", type=Path, default=Path("runs/damc_compare"))
    args = ap.parse_args()
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma")))
    print(f"CPU: {cpu_model()} ({' '.join(flags)}); torch {torch.__version__}; "
          f"{args.threads} thread(s); budget {args.budget_s:.0f} s per run")
    cost = {k: seconds_per_iteration(r, args.overrides, args.calibrate, args.threads)
            for k, r in RECIPES.items()}
    steps = {k: max(1, int(args.budget_s / c)) for k, c in cost.items()}
    print(f"s/iteration: langevin {cost['langevin']:.3f}, damc {cost['damc']:.3f} "
          f"(ratio {cost['damc'] / cost['langevin']:.2f}); steps in the budget: {steps}")
    metrics = args.metrics.split(",")
    print("| seed | " + " | ".join(f"{k} 2020 prior | {k} DAMC" for k in metrics) + " |")
    print("|---" * (1 + 2 * len(metrics)) + "|")
    res: dict[str, list[dict[str, float]]] = {k: [] for k in RECIPES}
    for seed in args.seeds:
        for k, recipe in RECIPES.items():
            run = args.out / f"s{seed}_{k}_{steps[k]}"
            res[k].append(train_and_eval(recipe, run, seed, steps[k], args.threads,
                                         args.overrides, metrics))
        a, b = res["langevin"][-1], res["damc"][-1]
        print(f"| {seed} | " + " | ".join(f"{a[k]:.5g} | {b[k]:.5g}" for k in metrics) + " |")
    print("| mean ± std | " + " | ".join(
        f"{mean_std([r[k] for r in res['langevin']])} | {mean_std([r[k] for r in res['damc']])}"
        for k in metrics) + " |")


if __name__ == "__main__":
    main()
