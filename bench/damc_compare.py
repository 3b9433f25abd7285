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

``--calibrate-only`` stops after step 1 and prints each side's seconds per iteration, the
ratio and the iterations the budget buys (with ``--steps N``: how many DAMC iterations take as
long as N of the 2020 prior's); ``--task anomaly`` times the anomaly recipes
(``lebm_mnist_anomaly`` vs ``damc_mnist_anomaly``), which is how the DAMC anomaly runs got
their equal-time length (bench/lebm_anomaly_protocol.py trains and scores those).

``--damc-set KEY=VALUE`` changes the DAMC side only (a cheaper DAMC: shorter chains from the
amortizer's start); such runs belong in their own ``--out``.

``--steps N`` compares at the same number of iterations instead (no calibration; a finished
run is reused only if it has exactly N), which separates what the method does per iteration
from what it costs; ``--recipes langevin`` (or ``damc``) trains and evaluates one side only.

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
from shortrun.hardware import cpu_flags, cpu_model, cpu_signature
from shortrun.models.base import OptimOptions
from shortrun.models.registry import build_model
from shortrun.speed.layout import settle_layouts
from shortrun.train.config import resolve

TASKS = {"generation": {"langevin": "lebm_mnist", "damc": "damc_mnist"},
         "anomaly": {"langevin": "lebm_mnist_anomaly", "damc": "damc_mnist_anomaly"}}
RECIPES = TASKS["generation"]


def seconds_per_iteration(recipe: str, overrides: list[str], n: int, threads: int) -> float:
    """Mean wall-clock seconds of one training iteration (after one warm-up)."""
    torch.set_num_threads(threads)
    cfg = resolve(recipe, overrides)
    data = load_data(cfg.data)
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg, data.info)
    opts = model.configure_training(OptimOptions.from_train(cfg.train))
    bs = cfg.train.batch_size
    settle_layouts(model, bs)  # channels_last: auto, as the Trainer settles it
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


def pictures(runs: dict[str, Path], out: Path, same: str, n_recon: int = 10,
             mse_images: int = 500) -> dict[str, float]:
    """Prior samples and reconstructions of the 2020 prior's run beside DAMC's (same seed,
    and ``same``: the wall-clock budget or the iterations, as words for the title); returns
    the reconstruction MSEs shown in the caption."""
    import gallery_draw as draw

    from shortrun.run import load_run

    loaded = {k: load_run(r) for k, r in runs.items()}
    models = {k: run.model for k, run in loaded.items()}
    steps = {k: run.step for k, run in loaded.items()}
    lang, damc = models["langevin"], models["damc"]
    info = lang.info
    title = (f"MNIST, {same}: 2020 prior "
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


def side_overrides(side: str, args: argparse.Namespace) -> list[str]:
    """``--set`` for both sides, then ``--damc-set`` for the DAMC side only."""
    return args.overrides + (args.damc_overrides if side == "damc" else [])


def calibrate_only(recipes: dict[str, str], args: argparse.Namespace) -> None:
    """Print the two recipes' seconds per iteration, timed in this process, and the iteration
    counts of equal wall-clock time."""
    cost = {k: seconds_per_iteration(r, side_overrides(k, args), args.calibrate, args.threads)
            for k, r in recipes.items()}
    ratio = cost["damc"] / cost["langevin"]
    print(f"s/iteration over {args.calibrate} iterations: "
          + ", ".join(f"{recipes[k]} {c:.3f}" for k, c in cost.items())
          + f" (DAMC / 2020 prior {ratio:.2f})")
    if args.steps is not None:
        print(f"{args.steps} iterations of {recipes['langevin']} take as long as "
              f"{args.steps / ratio:.0f} of {recipes['damc']}")
    else:
        print(f"iterations in {args.budget_s:.0f} s: "
              + ", ".join(f"{recipes[k]} {int(args.budget_s / c)}" for k, c in cost.items()))


def mean_std(xs: list[float]) -> str:
    return f"{statistics.mean(xs):.4g} ± {statistics.stdev(xs):.2g}" if len(xs) > 1 \
        else f"{xs[0]:.4g}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--budget-s", type=float, default=1800.0,
                    help="wall-clock training budget per run, seconds")
    ap.add_argument("--steps", type=int, default=None,
                    help="train every run this many iterations (equal iterations, not equal "
                         "time; skips the calibration)")
    ap.add_argument("--recipes", default="langevin,damc",
                    help="which sides to run: langevin (the 2020 prior), damc, or both")
    ap.add_argument("--calibrate", type=int, default=5, help="iterations timed per recipe")
    ap.add_argument("--calibrate-only", action="store_true",
                    help="time both recipes, print the equal-time iteration counts, train "
                         "nothing")
    ap.add_argument("--task", choices=sorted(TASKS), default="generation",
                    help="which recipe pair: generation (lebm_mnist / damc_mnist) or anomaly "
                         "(lebm_mnist_anomaly / damc_mnist_anomaly; --calibrate-only only)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="extra KEY=VALUE for both recipes (e.g. data.n_train=10000)")
    ap.add_argument("--damc-set", dest="damc_overrides", action="append", default=[],
                    help="extra KEY=VALUE for the DAMC recipe only (e.g. model.post_steps=10); "
                         "give such runs their own --out, since finished runs are reused by "
                         "seed and length")
    ap.add_argument("--metrics", default="fd,mse",
                    help="fd needs the MNIST classifier extractor (shortrun train "
                         "classifier_mnist --out runs/features/mnist, or --set eval.extractor=RUN)")
    ap.add_argument("--out", type=Path, default=Path("runs/damc_compare"))
    ap.add_argument("--pictures", type=Path, default=None,
                    help="also draw the first seed's runs side by side into this folder")
    ap.add_argument("--picture-mse-images", type=int, default=500,
                    help="test images behind the reconstruction MSE of the picture's caption")
    args = ap.parse_args()
    sides = args.recipes.split(",")
    unknown = sorted(set(sides) - set(RECIPES))
    if unknown or not sides:
        ap.error(f"--recipes {args.recipes!r}: unknown {unknown}; choose from {sorted(RECIPES)}")
    if args.pictures is not None and set(sides) != set(RECIPES):
        ap.error("--pictures draws both sides: leave --recipes at langevin,damc")
    if args.calibrate_only and set(sides) != set(RECIPES):
        ap.error("--calibrate-only compares both sides: leave --recipes at langevin,damc")
    if args.task != "generation" and not args.calibrate_only:
        ap.error(f"--task {args.task} only calibrates (add --calibrate-only); train and score "
                 "the anomaly recipes with bench/lebm_anomaly_protocol.py")
    recipes = TASKS[args.task]
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma")))
    what = ("calibration only" if args.calibrate_only
            else f"{args.steps} iterations per run" if args.steps is not None
            else f"budget {args.budget_s:.0f} s per run")
    sig = cpu_signature()
    print(f"CPU: {cpu_model()} ({' '.join(flags)}{'; ' + sig if sig else ''}); "
          f"torch {torch.__version__}; "
          f"{args.threads} thread(s); {what}")
    if args.calibrate_only:
        calibrate_only(recipes, args)
        return
    if args.steps is not None:
        steps = {k: args.steps for k in sides}
    else:
        cost = {k: seconds_per_iteration(RECIPES[k], side_overrides(k, args), args.calibrate,
                                         args.threads) for k in sides}
        steps = {k: max(1, int(args.budget_s / c)) for k, c in cost.items()}
        ratio = (f" (ratio {cost['damc'] / cost['langevin']:.2f})"
                 if len(cost) == 2 else "")
        print("s/iteration: " + ", ".join(f"{k} {c:.3f}" for k, c in cost.items())
              + f"{ratio}; steps in the budget: {steps}")
    metrics = args.metrics.split(",")
    names = {"langevin": "2020 prior", "damc": "DAMC"}
    print("| seed | " + " | ".join(f"{m} {names[k]}" for m in metrics for k in sides) + " |")
    print("|---" * (1 + len(sides) * len(metrics)) + "|")
    res: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
    first: dict[str, Path] = {}
    for seed in args.seeds:
        for k in sides:
            # a finished run of this seed is reused whatever its length when the steps come
            # from a budget (a rerun calibrates again and may count a few iterations more or
            # less); with --steps only a run of exactly that length
            pattern = f"s{seed}_{k}_{args.steps if args.steps is not None else '*'}/eval.json"
            done = sorted(args.out.glob(pattern))
            run = done[0].parent if done else args.out / f"s{seed}_{k}_{steps[k]}"
            first.setdefault(k, run)
            res[k].append(train_and_eval(RECIPES[k], run, seed, steps[k], args.threads,
                                         side_overrides(k, args), metrics))
        print(f"| {seed} | " + " | ".join(f"{res[k][-1][m]:.5g}" for m in metrics
                                          for k in sides) + " |")
    print("| mean ± std | " + " | ".join(mean_std([r[m] for r in res[k]])
                                         for m in metrics for k in sides) + " |")
    if args.pictures is not None:
        same = (f"the same {args.steps} iterations" if args.steps is not None
                else f"the same {args.budget_s / 60:.0f}-minute CPU budget")
        mse = pictures(first, args.pictures, same,
                       mse_images=args.picture_mse_images)
        print(f"pictures of seed {args.seeds[0]} in {args.pictures}: reconstruction MSE "
              + ", ".join(f"{k} {v:.4f}" for k, v in mse.items()))


if __name__ == "__main__":
    main()
