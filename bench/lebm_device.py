"""``lebm_svhn`` training iterations on an accelerator: fp32 eager, bf16 autocast for the
chains, and ``torch.compile`` of the networks, each checked to keep results.

    .venv/bin/python bench/lebm_device.py --device cuda --iters 20 --json $OUT/lebm_device.json

Check for each option (same seed, same weights, same data, one iteration from the same start):
the posterior and prior samples and the generator loss must match fp32 eager within a tolerance
(fp32 compile: 1e-3 relative; bf16: 5e-2 relative, the chain's own noise is 0.1-0.4 per step),
and a short training run must keep the loss finite. The results table is printed as markdown.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time

import torch

from shortrun.data.base import DataInfo
from shortrun.models.base import OptimOptions
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

SVHN = DataInfo((3, 32, 32), "image", -1.0, 1.0, 127.5, 127.5)


def build(device: str, compile_nets: bool, seed: int = 0):
    torch.manual_seed(seed)
    cfg = resolve("lebm_svhn", ["model.channels_last=" + ("true" if device == "cpu" else "false")])
    model = build_model(cfg, SVHN).to(device)
    if compile_nets:
        model.generator.net = torch.compile(model.generator.net)
        model.tilt.net = torch.compile(model.tilt.net)
    return model, model.configure_training(OptimOptions.from_train(cfg.train))


def autocast(device: str, bf16: bool):
    if not bf16:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16)


def one_iteration(model, opts, x, bf16: bool, device: str, seed: int):
    torch.manual_seed(seed)
    with autocast(device, bf16):
        z_pos = model.sample_posterior(x).float()
        z_neg = model.sample_prior(x.shape[0]).float()
    with torch.no_grad():
        loss_g = float(((x - model.generator(z_pos)) ** 2).flatten(1).sum(1).mean())
    return z_pos, z_neg, loss_g


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--json", default=None)
    ap.add_argument("--options", default="fp32,bf16_chains,compile,compile_bf16")
    args = ap.parse_args()
    dev = args.device
    if dev.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    x = (torch.rand(args.batch, 3, 32, 32, generator=torch.Generator().manual_seed(1)) * 2 - 1
         ).to(dev)
    options = {"fp32": (False, False), "bf16_chains": (True, False),
               "compile": (False, True), "compile_bf16": (True, True)}
    base = None
    out = {"device": torch.cuda.get_device_name() if dev.startswith("cuda") else "cpu",
           "batch": args.batch, "torch": torch.__version__}
    print("| option | s/iter | z+ rel. diff | z- rel. diff | loss_g rel. diff | ok |")
    print("|---|---|---|---|---|---|")
    chosen = [o.strip() for o in args.options.split(",") if o.strip()]
    for name, (bf16, comp) in ((k, options[k]) for k in chosen):
        try:
            model, opts = build(dev, comp)
            res = one_iteration(model, opts, x, bf16, dev, seed=3)
        except Exception as exc:  # an option this machine cannot run is reported, not fatal
            print(f"| {name} | - | - | - | - | failed: {type(exc).__name__}: {exc} |")
            out[name] = {"error": str(exc)}
            continue
        if base is None:
            base = res
        dzp = float((res[0] - base[0]).norm() / base[0].norm())
        dzn = float((res[1] - base[1]).norm() / base[1].norm())
        dl = abs(res[2] - base[2]) / abs(base[2])
        tol = 5e-2 if bf16 else 1e-3
        for _ in range(2):  # warm-up: compilation, cudnn autotuning
            with autocast(dev, bf16):
                model.training_step(x, 0, opts)
        sync(dev)
        t = time.perf_counter()
        for i in range(args.iters):
            with autocast(dev, bf16):
                met = model.training_step(x, i, opts)
        sync(dev)
        sec = (time.perf_counter() - t) / args.iters
        finite = all(v == v and abs(v) < 1e9 for v in met.values())
        ok = finite and max(dzp, dzn, dl) < tol
        out[name] = {"s_per_iter": sec, "rel_diff_z_pos": dzp, "rel_diff_z_neg": dzn,
                     "rel_diff_loss_g": dl, "tolerance": tol, "ok": ok}
        print(f"| {name} | {sec:.4f} | {dzp:.2e} | {dzn:.2e} | {dl:.2e} | {ok} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
