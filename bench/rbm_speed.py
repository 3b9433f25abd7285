"""One epoch of CD-1 on MNIST (60,000 × 784, 500 hidden, batch 100): shortrun vs scikit-learn's
BernoulliRBM (n_iter=1), side by side in one process, with the machine's fp32 matmul peak
(NumPy, torch.mm and oneDNN) measured in the same run.

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


def matmul_peak(repeats: int, size: int = 2048) -> tuple[float, float, float]:
    """Best GFLOP/s of an fp32 ``size³`` GEMM in NumPy, in PyTorch's ``torch.mm`` and in
    oneDNN (``mkldnn._linear_pointwise``, the route shortrun's RBM takes; 0 if unavailable)."""
    from shortrun.onednn import onednn_linear, onednn_usable

    a = np.random.default_rng(0).random((size, size), dtype=np.float32)
    b = np.random.default_rng(1).random((size, size), dtype=np.float32)
    out = np.empty_like(a)
    ta, tb, to = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(out)
    best = [float("inf")] * 3
    runs = [lambda: np.matmul(a, b, out=out), lambda: torch.mm(ta, tb, out=to)]
    if onednn_usable(ta, tb):
        runs.append(lambda: onednn_linear(ta, tb.t()))
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
    from shortrun.models.rbm import BernoulliRBM
    from shortrun.train.config import build_config

    raw = {"data": {"name": "mnist", "binarize": 0.5},
           "model": {"name": "rbm", "n_hidden": 500, "learning": "cd", "k": 1},
           "train": {"epochs": 1, "batch_size": 100, "lr": 0.01}}
    cfg = build_config(raw)
    info = DataInfo(shape=(784,), kind="binary", low=0.0, high=1.0)
    model = BernoulliRBM(cfg, info)
    model.on_train_start(LoadedData(train=x, info=info))
    return model, model.build_optimizers()


def shortrun_epoch(x: torch.Tensor) -> float:
    """The model's own ``training_step`` over one epoch of batches (what the Trainer calls)."""
    model, opts = shortrun_model(x)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    batches = [x[perm[i:i + 100]] for i in range(0, len(x), 100)]
    t = time.perf_counter()
    for step, batch in enumerate(batches):
        model.training_step(batch, step, opts)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=60_000)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    x_np = mnist_binary(args.n)
    x = torch.from_numpy(x_np)
    flop = FLOP_PER_UPDATE * (args.n // 100)
    times: dict[str, float] = {"sklearn": float("inf"), "shortrun": float("inf")}
    peaks = [0.0, 0.0, 0.0]
    for r in range(args.repeats):
        peak = matmul_peak(1)
        peaks = [max(a, b) for a, b in zip(peaks, peak, strict=True)]
        times["sklearn"] = min(times["sklearn"], sklearn_epoch(x_np))
        times["shortrun"] = min(times["shortrun"], shortrun_epoch(x))
        print(f"repeat {r + 1}: sklearn {times['sklearn']:.2f}s  shortrun {times['shortrun']:.2f}s"
              f"  peak numpy {peaks[0]:.0f} torch.mm {peaks[1]:.0f} oneDNN {peaks[2]:.0f} GFLOP/s",
              flush=True)
    best_peak = max(peaks)
    print(f"threads={args.threads}, {args.n} images = {args.n // 100} updates per pass "
          f"(best of {args.repeats}); an epoch of 60,000 is {60_000 / args.n:g}× a pass")
    print(f"fp32 GEMM peak: numpy {peaks[0]:.1f}, torch.mm {peaks[1]:.1f}, "
          f"oneDNN {peaks[2]:.1f} GFLOP/s")
    for name, t in times.items():
        rate = flop / t / 1e9
        print(f"{name:9s} {t:6.2f} s/pass  {rate:6.1f} GFLOP/s  "
              f"{100 * rate / best_peak:5.1f}% of the fastest peak")
    print(f"speed-up shortrun vs sklearn: {times['sklearn'] / times['shortrun']:.2f}x")


if __name__ == "__main__":
    main()
