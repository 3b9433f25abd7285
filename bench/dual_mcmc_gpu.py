"""Seconds per Dual-MCMC iteration of the CIFAR-10 recipe on a CUDA device.

The full ``dual_mcmc_cifar10`` recipe (512-wide nets, batch 100, K_x = 30 twice per batch with
``resample_x``, K_z = 10) on a synthetic 32×32×3 batch, timed with CUDA synchronisation, next to
the plain-PyTorch reference loop of ``bench/dual_mcmc_speed.py`` (the released script's update,
same networks). Also reports the iterations per epoch of CIFAR-10 (500 at batch 100), so the
paper's 301 epochs can be costed.

    python bench/dual_mcmc_gpu.py --iters 20 --repeats 3            # fp32
    python bench/dual_mcmc_gpu.py --iters 20 --repeats 3 --tf32     # TF32 matmuls/convs

Needs a CUDA device; on a machine without one it says so and exits 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dual_mcmc_speed import reference_step  # noqa: E402

from shortrun.data.base import DataInfo  # noqa: E402
from shortrun.models.base import OptimOptions  # noqa: E402
from shortrun.models.dual_mcmc import DualMCMC  # noqa: E402
from shortrun.train.config import build_config, load_recipe  # noqa: E402


def timed(fn, iters: int, repeats: int) -> float:
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tf32", action="store_true")
    p.add_argument("--no-reference", action="store_true")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("dual_mcmc_gpu: no CUDA device here; run this on a GPU machine", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = True
    name, raw = load_recipe("dual_mcmc_cifar10")
    raw["data"] = {"name": "fashion"}  # config only: the batch below is synthetic 32×32×3
    cfg = build_config(raw, recipe=name)
    info = DataInfo(shape=(3, 32, 32), kind="image", low=-1.0, high=1.0)
    torch.manual_seed(0)
    dev = torch.device("cuda")
    x = torch.rand(cfg.train.batch_size, 3, 32, 32, device=dev) * 2 - 1
    torch.set_default_device(dev)  # the reference loop draws its noise on the default device
    ours = DualMCMC.from_config(cfg.model, info).to(dev)
    opt = ours.configure_training(OptimOptions.from_train(cfg.train))
    t_ours = timed(lambda: ours.training_step(x, 0, opt), args.iters, args.repeats)
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"tf32={args.tf32}, batch {cfg.train.batch_size}")
    print(f"shortrun  dual_mcmc_cifar10: {t_ours:.4f} s/iter; 500 iter/epoch -> "
          f"{t_ours * 500 / 60:.1f} min/epoch, {t_ours * 500 * 301 / 3600:.1f} h for 301 epochs")
    if not args.no_reference:
        ref = DualMCMC.from_config(cfg.model, info).to(dev)
        opt_ref = ref.configure_training(OptimOptions.from_train(cfg.train))
        t_ref = timed(lambda: reference_step(ref, x, opt_ref), args.iters, args.repeats)
        print(f"reference dual_mcmc_cifar10: {t_ref:.4f} s/iter; ratio shortrun/reference "
              f"{t_ours / t_ref:.2f}")
    print(f"peak memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
