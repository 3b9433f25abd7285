"""Cost per training iteration of the latent prior learned by energy discrepancy
(``ed_lebm_mnist``) beside the 2020 prior (``lebm_mnist``) and ``damc_mnist_short``, timed side
by side in one process: interleaved rounds of ``--calibrate`` iterations each (after one
warm-up), process CPU seconds and wall seconds, at ``--threads`` threads. It prints each
recipe's seconds per iteration, its ratio to ``lebm_mnist``'s, and how many iterations take
as long as ``--steps`` of ``lebm_mnist`` (the equal-budget iteration counts of
bench/damc_compare.py).

    SHORTRUN_DATA=/work/shared/data python bench/ed_lebm_cost.py --calibrate 10 --steps 3000
"""

from __future__ import annotations

import argparse
import time

import torch

from shortrun.data.registry import load_data
from shortrun.hardware import cpu_model, cpu_signature
from shortrun.models.base import OptimOptions
from shortrun.models.registry import build_model
from shortrun.speed.layout import settle_layouts
from shortrun.train.config import resolve

RECIPES = ("lebm_mnist", "damc_mnist_short", "ed_lebm_mnist")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calibrate", type=int, default=10, help="iterations per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=3000, help="lebm_mnist iterations of the budget")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    data = None
    setups = {}
    for recipe in RECIPES:
        cfg = resolve(recipe)
        data = data or load_data(cfg.data)
        torch.manual_seed(cfg.train.seed)
        model = build_model(cfg, data.info)
        opts = model.configure_training(OptimOptions.from_train(cfg.train))
        bs = cfg.train.batch_size
        settle_layouts(model, bs)  # channels_last: auto, as the Trainer settles it
        model.training_step(data.train[:bs], 0, opts)  # warm-up (and route measurements)
        setups[recipe] = (model, opts, bs)
    cpu = dict.fromkeys(RECIPES, 0.0)
    wall = dict.fromkeys(RECIPES, 0.0)
    x = data.train
    for r in range(args.rounds):
        for recipe, (model, opts, bs) in setups.items():
            c0, w0 = time.process_time(), time.perf_counter()
            for k in range(args.calibrate):
                i = ((r * args.calibrate + k + 1) * bs) % (x.shape[0] - bs)
                model.training_step(x[i: i + bs], k + 1, opts)
            cpu[recipe] += time.process_time() - c0
            wall[recipe] += time.perf_counter() - w0
    n = args.rounds * args.calibrate
    base_cpu, base_wall = cpu[RECIPES[0]] / n, wall[RECIPES[0]] / n
    print(f"{cpu_model()} ({cpu_signature()}), torch {torch.__version__}, "
          f"{args.threads} thread(s), {n} iterations per recipe")
    print("| recipe | CPU s / it. | ratio | wall s / it. | ratio | iterations in the time of "
          f"{args.steps} lebm_mnist |")
    print("|---|---:|---:|---:|---:|---:|")
    for recipe in RECIPES:
        c, w = cpu[recipe] / n, wall[recipe] / n
        print(f"| `{recipe}` | {c:.3f} | {c / base_cpu:.2f} | {w:.3f} | {w / base_wall:.2f} | "
              f"{round(args.steps * base_cpu / c)} |")


if __name__ == "__main__":
    main()
