"""One epoch of CD-1 on MNIST (60,000 × 784, 500 hidden, batch 100): shortrun vs scikit-learn's
BernoulliRBM (n_iter=1), side by side in one process, with the machine's fp32 matmul peak
(NumPy and torch.mm) measured in the same run; also shortrun with
``train.precision=bf16`` (bf16 products, float32 accumulation and parameters) against the bf16
peak.

    SHORTRUN_DATA=/work/shared/data .venv/bin/python bench/rbm_speed.py --repeats 3

FLOPs per update: five GEMMs of 100 × 784 × 500 (data → h, h → v′, v′ → h′, and the two
outer products of the update), 2·5·100·784·500 = 392 MFLOP; 600 updates = 235 GFLOP per
epoch. scikit-learn's update has the same five GEMMs (it runs PCD-1 rather than CD-1, which
costs the same). Times are the best of ``--repeats``; the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

FLOP_PER_UPDATE = 2 * 5 * 100 * 784 * 500


def mnist_binary(n: int) -> np.ndarray:
    root = os.environ.get("SHORTRUN_DATA", "/work/shared/data")
    with np.load(os.path.join(root, "mnist.npz")) as f:
        x = f["x_train"][:n].reshape(-1, 784)
    return (x > 127.5).astype(np.float32)


def matmul_peak(repeats: int, size: int = 2048) -> tuple[float, float]:
    """Best GFLOP/s of an fp32 ``size³`` GEMM in NumPy and in PyTorch's ``torch.mm``."""
    a = np.random.default_rng(0).random((size, size), dtype=np.float32)
    b = np.random.default_rng(1).random((size, size), dtype=np.float32)
    out = np.empty_like(a)
    ta, tb, to = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(out)
    best = [float("inf")] * 2
    runs = [lambda: np.matmul(a, b, out=out), lambda: torch.mm(ta, tb, out=to)]
    for _ in range(repeats * 2):
        for i, run in enumerate(runs):
            t = time.perf_counter()
            run()
            best[i] = min(best[i], time.perf_counter() - t)
    flop = 2 * size**3
    return tuple(flop / t / 1e9 for t in best)  # type: ignore[return-value]


def sklearn_epoch(x: np.ndarray) -> float:
    from sklearn.neural_network import BernoulliRBM

    rbm = BernoulliRBM(n_components=500, learning_rate=0.01, batch_size=100, n_iter=1,
                       random_state=0)
    t = time.perf_counter()
    rbm.fit(x)
    return time.perf_counter() - t


def shortrun_model(x: torch.Tensor):
    from shortrun.data.base import DataInfo, LoadedData
    from shortrun.models.base import OptimOptions
    from shortrun.models.rbm import BernoulliRBM
    from shortrun.train.config import build_config

    raw = {"data": {"name": "mnist", "binarize": 0.5},
           "model": {"name": "rbm", "n_hidden": 500, "learning": "cd", "k": 1},
           "train": {"epochs": 1, "batch_size": 100, "lr": 0.01}}
    cfg = build_config(raw)
    info = DataInfo(shape=(784,), kind="binary", low=0.0, high=1.0)
    model = BernoulliRBM.from_config(cfg.model, info)
    model.on_train_start(LoadedData(train=x, info=info))
    return model, model.configure_training(OptimOptions.from_train(cfg.train))


def shortrun_epoch(x: torch.Tensor, bf16: bool = False) -> float:
    """The model's own ``training_step`` over one epoch of batches (what the Trainer calls),
    under bf16 autocast when ``bf16`` (what ``train.precision=bf16`` does). Each minibatch is
    gathered inside the timer, as the Trainer does every step; bench/run_all.py times the
    Trainer itself."""
    model, opts = shortrun_model(x)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    t = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for step, i in enumerate(range(0, len(x), 100)):
            model.training_step(x[perm[i:i + 100]], step, opts)
    return time.perf_counter() - t


def bf16_peak(repeats: int, size: int = 2048) -> float:
    """Best GFLOP/s of a bf16 ``size³`` ``torch.mm`` (float32 accumulation); 0 where bf16 is
    not native."""
    from shortrun import hardware

    if not hardware.has_native_bf16("cpu"):
        return 0.0
    a = torch.rand(size, size).bfloat16()
    best = float("inf")
    for _ in range(repeats * 2):
        t = time.perf_counter()
        torch.mm(a, a)
        best = min(best, time.perf_counter() - t)
    return 2 * size**3 / best / 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=60_000)
    ap.add_argument("--no-bf16", action="store_true", help="skip the train.precision=bf16 row")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    x_np = mnist_binary(args.n)
    x = torch.from_numpy(x_np)
    flop = FLOP_PER_UPDATE * (args.n // 100)
    times = {"sklearn": float("inf"), "shortrun": float("inf"), "shortrun_bf16": float("inf")}
    peaks, peak16 = [0.0, 0.0], 0.0
    for r in range(args.repeats):
        peak = matmul_peak(1)
        peaks = [max(a, b) for a, b in zip(peaks, peak, strict=True)]
        peak16 = max(peak16, bf16_peak(1))
        times["sklearn"] = min(times["sklearn"], sklearn_epoch(x_np))
        times["shortrun"] = min(times["shortrun"], shortrun_epoch(x))
        if not args.no_bf16:
            times["shortrun_bf16"] = min(times["shortrun_bf16"], shortrun_epoch(x, bf16=True))
        print(f"repeat {r + 1}: sklearn {times['sklearn']:.2f}s  shortrun {times['shortrun']:.2f}s"
              f"  bf16 {times['shortrun_bf16']:.2f}s  peak numpy {peaks[0]:.0f} "
              f"torch.mm {peaks[1]:.0f} bf16 torch.mm {peak16:.0f} GFLOP/s",
              flush=True)
    best_peak = max(peaks)
    print(f"threads={args.threads}, {args.n} images = {args.n // 100} updates per pass "
          f"(best of {args.repeats}); an epoch of 60,000 is {60_000 / args.n:g}× a pass")
    print(f"fp32 GEMM peak: numpy {peaks[0]:.1f}, torch.mm {peaks[1]:.1f} GFLOP/s; "
          f"bf16 (torch.mm) {peak16:.1f} GFLOP/s")
    for name, t in times.items():
        if t == float("inf"):
            continue
        rate = flop / t / 1e9
        kind = "bf16" if name.endswith("bf16") else "fp32"
        ref = peak16 if kind == "bf16" else best_peak
        print(f"{name:13s} {t:6.2f} s/pass  {rate:6.1f} GFLOP/s  "
              f"{100 * rate / ref:5.1f}% of the fastest {kind} peak"
              f"  speed-up vs sklearn {times['sklearn'] / t:.2f}x")


if __name__ == "__main__":
    main()
