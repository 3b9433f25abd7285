"""Grid KL(data‖model) of a 2-D recipe every ``--every`` steps of one training run: shows
whether a run's last value is converged or caught mid-swing (how ``ed_8gaussians``'s lr decay
was chosen, docs/losses.md). Training is the recipe with ``train.seed``, ``train.steps`` and
``--set`` overrides, 1 thread; the KL evaluations are left out of the CPU seconds printed.

    OMP_NUM_THREADS=1 python bench/kl_trajectory.py ed_8gaussians --seed 0 --steps 2892 \\
        --set train.lr_decay=0.97 --out runs/ed8/s0
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from shortrun.data.registry import load_data
from shortrun.estimators.grid import grid_metrics
from shortrun.train.config import resolve
from shortrun.train.trainer import Trainer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recipe")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--every", type=int, default=250, help="steps between KL evaluations")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", type=Path, required=True, help="run directory (must be new)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    cfg = resolve(a.recipe, [f"train.seed={a.seed}", f"train.steps={a.steps}",
                             "train.threads=1", "train.progress=false",
                             "train.sample_every=1000000", f"train.ckpt_every={a.every}", *a.set])
    data = load_data(cfg.data)
    kls: list[tuple[int, float]] = []
    eval_cpu = [0.0]

    class KLTrainer(Trainer):
        def save(self) -> None:  # every checkpoint: the grid KL of the model as it is now
            super().save()
            start = time.process_time()
            with torch.no_grad():
                kl = grid_metrics(self.model.density_energy(), data, ["kl_grid"])["kl_grid"]
            kls.append((self.step, round(kl, 4)))
            eval_cpu[0] += time.process_time() - start

    start = time.process_time()
    KLTrainer(cfg, a.out).fit()
    cpu = time.process_time() - start - eval_cpu[0]
    print(json.dumps({"recipe": a.recipe, "seed": a.seed, "steps": a.steps, "sets": a.set,
                      "train_cpu_s": round(cpu, 1), "kl": kls}))


if __name__ == "__main__":
    main()
