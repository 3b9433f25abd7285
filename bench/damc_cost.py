"""Where a ``damc_mnist`` iteration spends its time (Yu et al. 2023 on the LEBM prior): the
amortizer's draw for the batch, the posterior chain, the prior chains, the amortizer's updates,
and the whole iteration, each the mean of ``--repeats`` calls after one warm-up iteration.

    SHORTRUN_DATA=/work/shared/data python bench/damc_cost.py --threads 1 \\
        --set model.damc_steps=20
"""

from __future__ import annotations

import argparse
import time

import torch

from shortrun.data.registry import load_data
from shortrun.hardware import cpu_model
from shortrun.models.base import OptimOptions
from shortrun.models.registry import build_model
from shortrun.speed.layout import settle_layouts
from shortrun.train.config import resolve


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", default="damc_mnist")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = resolve(args.recipe, ["data.n_train=1000", *args.overrides])
    data = load_data(cfg.data)
    torch.manual_seed(0)
    m = build_model(cfg, data.info)
    opts = m.configure_training(OptimOptions.from_train(cfg.train))
    x = data.train[: cfg.train.batch_size]
    settle_layouts(m, len(x))  # channels_last: auto, as the Trainer settles it
    m.training_step(x, 0, opts)

    def timed(fn):
        start = time.perf_counter()
        for _ in range(args.repeats):
            out = fn()
        return (time.perf_counter() - start) / args.repeats, out

    t_init, z0 = timed(lambda: m.chains.start_posterior(x, slow=True))
    t_post, z_pos = timed(lambda: m.sample_posterior(x, start=z0))
    starts = torch.cat([z0, m.init_z(len(x))]) if m.options.damc_noise_chains else z0
    t_prior, _ = timed(lambda: m.sample_prior(len(starts), start=starts))
    t_learn, _ = timed(lambda: m.chains.learn(x, z_pos, opts, 1, m.optimizer_step))
    t_all, _ = timed(lambda: m.training_step(x, 1, opts))
    print(f"{cpu_model()}; torch {torch.__version__}; {args.threads} thread(s); "
          f"{args.recipe} {' '.join(args.overrides)}")
    print(f"amortizer draw ({m.options.damc_steps} steps) {t_init:.3f} s | posterior chain "
          f"({m.options.post_steps} steps) {t_post:.3f} s | prior chains ({len(starts)} x "
          f"{m.options.prior_steps} steps) {t_prior:.3f} s | {m.options.damc_updates} amortizer "
          f"updates {t_learn:.3f} s | whole iteration {t_all:.3f} s")


if __name__ == "__main__":
    main()
