"""DAMC (Yu et al. 2023) against the 2020 short-run prior (Pang et al.) on MNIST at the same
wall-clock budget: ``damc_mnist`` vs ``lebm_mnist`` (same generator, EBM, data and optimiser;
only the chains' start and length and the amortizer differ).

For every seed and both recipes it

1. times ``--calibrate`` training iterations in this process (after one warm-up) at
   ``--threads`` threads: the per-iteration cost;
2. trains the recipe for ``budget / cost`` iterations (so both get the same wall-clock
   budget), or reuses a finished run of that seed in ``--out``;
3. evaluates ``fd`` (the library's MNIST classifier extractor) and ``mse`` (test
   reconstruction) with ``shortrun eval`` (``--metrics`` chooses);
4. with ``--pictures DIR``, draws the first seed's two runs side by side: prior samples
   (``damc_prior_samples.png``) and test reconstructions (``damc_reconstructions.png``), with
   fixed seeds (bench/gallery_draw.py).

It prints one row per seed and a mean ± std row, with the CPU model, its flags summary and the
torch version.

    SHORTRUN_DATA=/work/shared/data python bench/damc_compare.py --seeds 1 2 3 \\
        --budget-s 1800 --out runs/damc_compare [--pictures docs/img]
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


def pictures(runs: dict[str, Path], out: Path, budget_s: float, n_recon: int = 10,
             mse_images: int = 500) -> dict[str, float]:
    """Prior samples and reconstructions of the 2020 prior's run beside DAMC's (same seed,
    same wall-clock budget); returns the reconstruction MSEs shown in the caption."""
    import gallery_draw as draw

    from shortrun.run import load_run

    loaded = {k: load_run(r) for k, r in runs.items()}
    models = {k: run.model for k, run in loaded.items()}
    steps = {k: run.step for k, run in loaded.items()}
    lang, damc = models["langevin"], models["damc"]
    info = lang.info
    title = (f"MNIST, the same {budget_s / 60:.0f}-minute CPU budget: 2020 prior "
             f"{steps['langevin']} iterations, DAMC {steps['damc']}")
    with torch.no_grad():
        x_l = lang.sample(64, generator=draw.seeded(0))
        x_d = damc.sample(64, generator=draw.seeded(0))
    draw.panels(out / "damc_prior_samples.png",
                [(f"2020 prior: {lang.options.prior_steps}-step chain from N(0, I)",
                  draw.grid(x_l, info)),
                 ("DAMC: q_φ(z), no chain", draw.grid(x_d, info))], title)
    x_test = load_data(loaded["langevin"].cfg.data).test
    pool, x = x_test[:mse_images], x_test[:n_recon]
    mse = {k: draw.recon_mse(m, pool) for k, m in models.items()}
    draw.rows(out / "damc_reconstructions.png",
              [("test images", x),
               (f"2020 prior\nMSE {mse['langevin']:.4f}",
                lang.reconstruct(x, generator=draw.seeded(1))),
               (f"DAMC\nMSE {mse['damc']:.4f}", damc.reconstruct(x, generator=draw.seeded(1)))],
              info, f"{title}; posterior chains of {lang.options.post_steps} and "
                    f"{damc.options.post_steps} steps (MSE per pixel on [-1, 1], "
                    f"{len(pool)} test images)")
    return mse


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
    ap.add_argument("--pictures", type=Path, default=None,
                    help="also draw the first seed's runs side by side into this folder")
    ap.add_argument("--picture-mse-images", type=int, default=500,
                    help="test images behind the reconstruction MSE of the picture's caption")
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
    first: dict[str, Path] = {}
    for seed in args.seeds:
        for k, recipe in RECIPES.items():
            # a finished run of this seed is reused whatever its length (a rerun calibrates
            # again and may count a few iterations more or less)
            done = sorted(args.out.glob(f"s{seed}_{k}_*/eval.json"))
            run = done[0].parent if done else args.out / f"s{seed}_{k}_{steps[k]}"
            first.setdefault(k, run)
            res[k].append(train_and_eval(recipe, run, seed, steps[k], args.threads,
                                         args.overrides, metrics))
        a, b = res["langevin"][-1], res["damc"][-1]
        print(f"| {seed} | " + " | ".join(f"{a[k]:.5g} | {b[k]:.5g}" for k in metrics) + " |")
    print("| mean ± std | " + " | ".join(
        f"{mean_std([r[k] for r in res['langevin']])} | {mean_std([r[k] for r in res['damc']])}"
        for k in metrics) + " |")
    if args.pictures is not None:
        mse = pictures(first, args.pictures, args.budget_s,
                       mse_images=args.picture_mse_images)
        print(f"pictures of seed {args.seeds[0]} in {args.pictures}: reconstruction MSE "
              + ", ".join(f"{k} {v:.4f}" for k, v in mse.items()))


if __name__ == "__main__":
    main()
