"""Seconds per training iteration of ``lebm_svhn`` at the official defaults (batch 100, K0 = 60,
K1 = 20, nz 100, ngf 64, ndf 200), shortrun vs a reference loop in the official formulation,
in the same process, plus achieved GFLOP/s against the machine's fp32 matmul peak measured in
the same run.

The reference follows the authors' ``train_svhn.py`` formulation (written here, not copied):
NCHW tensors, parameters left requiring grad inside the chains, two ``autograd.grad`` calls per
posterior step (likelihood term, then EBM term), in-place ``z.data`` updates.

    nice -n 10 .venv/bin/python bench/lebm_speed.py --threads 1 --repeats 3

Variants are interleaved (ref, ours, ours-NHWC, ref, ...) so load from other processes hits
them alike; the best and the median of the repeats are reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from flops import count_flops as count_graph_flops
from torch import nn

from shortrun.data.base import DataInfo
from shortrun.models.base import OptimOptions
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

SVHN = DataInfo((3, 32, 32), "image", -1.0, 1.0, 127.5, 127.5)


# ----------------------------------------------------------------------------- reference
def reference_nets(nz=100, ngf=64, ndf=200):
    f = nn.LeakyReLU(0.2)
    g = nn.Sequential(nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0), f,
                      nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1), f,
                      nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1), f,
                      nn.ConvTranspose2d(ngf * 2, 3, 4, 2, 1), nn.Tanh())
    e = nn.Sequential(nn.Linear(nz, ndf), nn.GELU(), nn.Linear(ndf, ndf), nn.GELU(),
                      nn.Linear(ndf, 1))
    return g, e


def reference_iteration(g, e, opt_g, opt_e, x, nz=100, k0=60, s0=0.4, k1=20, s1=0.1,
                        sigma=0.3, sigma_p=1.0):
    b = x.shape[0]

    def en(z):
        return e(z.squeeze()).squeeze()

    z = torch.randn(b, nz, 1, 1).requires_grad_(True)
    for _ in range(k1):
        lik = ((g(z) - x) ** 2).sum() / (2 * sigma**2)
        gg = torch.autograd.grad(lik, z)[0]
        ge = torch.autograd.grad(en(z).sum(), z)[0]
        z.data = z.data - 0.5 * s1 * s1 * (gg + ge + z.data / sigma_p**2)
        z.data += s1 * torch.randn_like(z)
    z_pos = z.detach()
    z = torch.randn(b, nz, 1, 1).requires_grad_(True)
    for _ in range(k0):
        ge = torch.autograd.grad(en(z).sum(), z)[0]
        z.data = z.data - 0.5 * s0 * s0 * (ge + z.data / sigma_p**2)
        z.data += s0 * torch.randn_like(z)
    z_neg = z.detach()
    opt_g.zero_grad()
    loss_g = ((g(z_pos) - x) ** 2).sum() / b
    loss_g.backward()
    opt_g.step()
    opt_e.zero_grad()
    loss_e = en(z_pos).mean() - en(z_neg).mean()
    loss_e.backward()
    opt_e.step()


# ----------------------------------------------------------------------------- timing
def matmul_peak(n=2048, reps=5) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(reps))
    return 2 * n**3 / best / 1e9


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.rand(args.batch, 3, 32, 32) * 2 - 1

    g, e = reference_nets()
    opt_g = torch.optim.Adam(g.parameters(), 1e-4, betas=(0.5, 0.999))
    opt_e = torch.optim.Adam(e.parameters(), 2e-5, betas=(0.5, 0.999))
    variants = {"reference": lambda: reference_iteration(g, e, opt_g, opt_e, x)}
    for label, cl in (("shortrun_nchw", "false"), ("shortrun_nhwc", "true")):
        cfg = resolve("lebm_svhn", [f"model.channels_last={cl}",
                                    f"train.batch_size={args.batch}"])
        model = build_model(cfg, SVHN)
        opts = model.configure_training(OptimOptions.from_train(cfg.train))
        variants[label] = (lambda m=model, o=opts: m.training_step(x, 0, o))

    # counted on each variant's own graph (bench/flops.py), not borrowed from the reference
    counted = {name: count_graph_flops(fn) for name, fn in variants.items()}
    flops_of = {name: c[0] for name, c in counted.items()}
    uncounted = set().union(*(c[1] for c in counted.values()))
    flops, ref_flops = flops_of["shortrun_nhwc"], flops_of["reference"]
    for fn in variants.values():  # warm-up (oneDNN primitive caches, allocator)
        fn()
    times: dict[str, list[float]] = {k: [] for k in variants}
    peaks = []
    for _ in range(args.repeats):
        peaks.append(matmul_peak())
        for name, fn in variants.items():
            times[name].append(_timed(fn))
    peak = max(peaks)
    out = {"threads": args.threads, "batch": args.batch, "matmul_peak_gflops": peak,
           "flops_per_iter": flops_of, "uncounted_ops": sorted(uncounted),
           "torch": torch.__version__}
    ref_best = min(times["reference"])
    print(f"threads={args.threads} batch={args.batch} fp32 matmul peak {peak:.1f} GFLOP/s; "
          f"shortrun {flops / 1e9:.1f} GFLOP/iter, reference {ref_flops / 1e9:.1f} GFLOP/iter"
          + (f"; uncounted ops {sorted(uncounted)}" if uncounted else ""))
    print("| variant | best s/iter | median s/iter | ref/this (best) | GFLOP/s | % of peak |")
    print("|---|---|---|---|---|---|")
    for name, ts in times.items():
        best, med = min(ts), statistics.median(ts)
        f = flops_of[name]
        gf = f / best / 1e9
        out[name] = {"best_s": best, "median_s": med, "all_s": ts, "gflops": gf,
                     "speedup_vs_reference": ref_best / best}
        print(f"| {name} | {best:.3f} | {med:.3f} | {ref_best / best:.2f}x | {gf:.1f} | "
              f"{100 * gf / peak:.0f}% |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
