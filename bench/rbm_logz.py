"""Exact log Z of a 784 × 20 Bernoulli RBM (2^20 hidden states): shortrun's enumeration vs a
plain chunked float32 PyTorch enumeration, both checked against a float64 enumeration.

    SHORTRUN_DATA=/work/shared/data .venv/bin/python bench/rbm_logz.py --repeats 3

The RBM: visible biases = logit of MNIST's binarised pixel means, hidden biases N(0, 1),
weights N(0, 0.1²) (seeded). Times are the best of ``--repeats``; the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from shortrun.energies.rbm import BernoulliRBMParams
from shortrun.estimators.exact import all_states, log_partition


def make_rbm(n_hidden: int = 20) -> BernoulliRBMParams:
    root = os.environ.get("SHORTRUN_DATA", "/work/shared/data")
    with np.load(os.path.join(root, "mnist.npz")) as f:
        x = (f["x_train"].reshape(-1, 784) > 127.5).mean(0)
    p = torch.from_numpy(x).float().clamp(1e-3, 1 - 1e-3)
    g = torch.Generator().manual_seed(0)
    return BernoulliRBMParams(0.1 * torch.randn(784, n_hidden, generator=g),
                              torch.log(p) - torch.log1p(-p),
                              torch.randn(n_hidden, generator=g))


def plain_enumeration(p: BernoulliRBMParams, chunk: int = 4096) -> float:
    """The obvious float32 loop: a GEMM and a softplus per chunk of hidden states."""
    H = all_states(p.n_hidden)
    parts = []
    for i in range(0, len(H), chunk):
        h = H[i:i + chunk]
        terms = h @ p.c + F.softplus(torch.addmm(p.b, h, p.W.t())).sum(-1)
        parts.append(torch.logsumexp(terms.double(), 0))
    return float(torch.logsumexp(torch.stack(parts), 0))


def timed(fn, repeats: int) -> tuple[float, float]:
    best, value = float("inf"), float("nan")
    for _ in range(repeats):
        t = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t)
    return best, value


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    p = make_rbm(args.hidden)
    t64, ref = timed(lambda: log_partition(p, torch.float64), 1)
    t32, val = timed(lambda: log_partition(p), args.repeats)
    tpl, plain = timed(lambda: plain_enumeration(p), args.repeats)
    print(f"784 x {args.hidden}, threads={args.threads}, best of {args.repeats}")
    print(f"float64 reference      {t64:7.2f} s  log Z = {ref:.6f}")
    print(f"shortrun float32       {t32:7.2f} s  rel. error {abs(val - ref) / abs(ref):.2e}")
    print(f"plain torch float32    {tpl:7.2f} s  rel. error {abs(plain - ref) / abs(ref):.2e}")
    print(f"speed-up vs plain: {tpl / t32:.2f}x")


if __name__ == "__main__":
    main()
