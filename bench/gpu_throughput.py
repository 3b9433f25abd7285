"""RBM CD-1 epoch and Langevin throughput on one device, through the library's public path.

- RBM: one epoch of CD-1 (60,000 × 784 binary, 500 hidden, batch 100) driven by the one
  Trainer on synthetic binary data (the device machine carries no datasets), best of
  ``--repeats``; achieved GFLOP/s from the five GEMMs per update.
- Langevin: MLP energy 2→128→128→1 (SiLU), 10,000 chains × 100 steps through
  ``shortrun.samplers.langevin.langevin`` next to a plain ``torch.autograd.grad`` loop.

    .venv/bin/python bench/gpu_throughput.py --device cuda --json $OUT/throughput.json

Runs on CPU too (``--device cpu``), which is how it is tested here.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from shortrun.data.base import DataInfo, LoadedData
from shortrun.energies.mlp import MLPEnergy
from shortrun.samplers.langevin import langevin
from shortrun.train.config import resolve
from shortrun.train.trainer import Trainer

GEMM_FLOP_PER_UPDATE = 2 * 5 * 100 * 784 * 500


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def rbm_epoch(device: torch.device, n: int, repeats: int) -> dict:
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(n, 1, 28, 28, generator=g) < 0.13).float()
    data = LoadedData(train=x, info=DataInfo((1, 28, 28), "binary", 0.0, 1.0))
    best = float("inf")
    for r in range(repeats):
        cfg = resolve("rbm_mnist", ["model.n_hidden=500", "model.learning=cd", "train.epochs=1",
                                    "train.progress=false", f"train.device={device}",
                                    "train.ckpt_every=1000000", "train.sample_every=1000000",
                                    "train.log_every=1000000", "sample.n=4", "sample.steps=1"])
        with tempfile.TemporaryDirectory() as tmp:
            trainer = Trainer(cfg, Path(tmp) / f"run{r}", data=data)
            sync(device)
            t0 = time.perf_counter()
            trainer.fit()
            sync(device)
            best = min(best, time.perf_counter() - t0)
    updates = n // 100
    return {"rbm_cd1_epoch_s": best,
            "rbm_gflops": GEMM_FLOP_PER_UPDATE * updates / best / 1e9, "rbm_examples": n}


def langevin_throughput(device: torch.device, chains: int, steps: int, repeats: int) -> dict:
    torch.manual_seed(0)
    energy = MLPEnergy(2, 128, 2, "silu").to(device)
    x0 = torch.randn(chains, 2, device=device)

    def plain(x):
        for _ in range(steps):
            x = x.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(energy(x).sum(), x)
            x = x - 0.5 * 0.01**2 * g + 0.01 * torch.randn_like(x)
        return x

    def ours(x):
        return langevin(energy, x, steps, 0.01)[0]

    out = {}
    for name, fn in (("shortrun", ours), ("plain_autograd", plain)):
        best = float("inf")
        for _ in range(repeats):
            sync(device)
            t0 = time.perf_counter()
            fn(x0)
            sync(device)
            best = min(best, time.perf_counter() - t0)
        out[f"langevin_{name}_chain_steps_per_s"] = chains * steps / best
    out["langevin_speedup_vs_plain"] = (out["langevin_shortrun_chain_steps_per_s"]
                                        / out["langevin_plain_autograd_chain_steps_per_s"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--n", type=int, default=60_000, help="RBM training examples")
    ap.add_argument("--chains", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    device = torch.device(args.device)
    result = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu"}
    result.update(rbm_epoch(device, args.n, args.repeats))
    result.update(langevin_throughput(device, args.chains, args.steps, args.repeats))
    print("| quantity | value |\n|---|---|")
    for k, v in result.items():
        print(f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
