"""Langevin sampling throughput, side by side in one process: shortrun vs ebmkit vs TorchEBM vs a
plain ``torch.autograd.grad`` loop.

Energy: MLP 2→128→128→1 (SiLU), the same weights for everyone; 10,000 chains × 100 steps of
``x ← x − ½s²∇E(x) + sξ`` (s = 0.01; each peer is given its own parametrisation of the same
update). Throughput = chains × steps / second; the best of ``--repeats`` runs is reported,
because the machine is shared. Peers are imported from whatever environment runs this script
(a throwaway venv, never a project dependency); a peer that is missing is reported as such.

    PYTHONPATH=src nice -n 10 /tmp/benchenv/bin/python bench/langevin_throughput.py \
        --threads 1 --repeats 7

The load average of the machine is printed before and after the run.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import torch

from shortrun.energies.mlp import MLPEnergy
from shortrun.samplers.langevin import langevin

S = 0.01  # our step size s: drift ½s²∇E, noise s


def plain_loop(energy, x, steps):
    for _ in range(steps):
        x = x.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(energy(x).sum(), x)
        x = x.detach() - 0.5 * S * S * g + S * torch.randn_like(x)
    return x


def ours(energy, x, steps):
    return langevin(energy, x, steps, S)[0]


def ours_autograd(energy, x, steps):
    return langevin(lambda z: energy(z), x, steps, S)[0]  # a plain callable: autograd path


def make_ebmkit():
    from ebm.samplers.langevin import LangevinDynamics

    # ebmkit: x' = x − ε∇E + σξ, so ε = ½s², σ = s.
    sampler = LangevinDynamics(step_size=0.5 * S * S, steps=1, noise_scale=S)
    return lambda energy, x, steps: sampler.sample(energy, x, steps=steps)


def make_torchebm():
    from torchebm.core import BaseModel
    from torchebm.samplers import LangevinDynamics

    class Wrapped(BaseModel):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(x)

    cache = {}

    def run(energy, x, steps):
        if "sampler" not in cache:
            # TorchEBM: x' = x − η∇U + √(2η)·τ·ξ, so η = ½s² and τ = 1.
            cache["sampler"] = LangevinDynamics(Wrapped(energy), step_size=0.5 * S * S,
                                                noise_scale=1.0)
        return cache["sampler"].sample(x=x, n_steps=steps)

    return run


def time_all(runners: dict, energy, x0, steps, repeats) -> dict[str, float]:
    """Best wall time per sampler; repeats are interleaved (A B C … A B C …) so that load from
    other processes on the shared machine hits every sampler alike."""
    for fn in runners.values():
        fn(energy, x0.clone(), 2)  # warm-up at full size (allocator, BLAS buffers)
    best = dict.fromkeys(runners, math.inf)
    for _ in range(repeats):
        for name, fn in runners.items():
            t = time.perf_counter()
            out = fn(energy, x0.clone(), steps)
            best[name] = min(best[name], time.perf_counter() - t)
            assert out.shape == x0.shape and torch.isfinite(out).all()
    return best


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--chains", type=int, default=10_000)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    energy = MLPEnergy(2, 128, 2, "silu")
    for q in energy.parameters():
        q.requires_grad_(True)
    x0 = torch.randn(args.chains, 2)
    runners = {"shortrun langevin": lambda: ours,
               "shortrun langevin (autograd path)": lambda: ours_autograd,
               "ebmkit LangevinDynamics": make_ebmkit,
               "TorchEBM LangevinDynamics": make_torchebm,
               "plain torch.autograd.grad loop": lambda: plain_loop}
    rows, ready = [], {}
    for name, make in runners.items():
        try:
            ready[name] = make()
        except ImportError as exc:
            rows.append((name, None, f"not installed ({exc.name})"))
    load_before = os.getloadavg()
    best = time_all(ready, energy, x0, args.steps, args.repeats)
    load_after = os.getloadavg()
    rows = [(name, args.chains * args.steps / sec, f"{sec:.3f} s")
            for name, sec in best.items()] + rows
    print(f"torch {torch.__version__}, threads={args.threads}, {platform.processor() or 'cpu'}, "
          f"{args.chains} chains x {args.steps} steps, best of {args.repeats}")
    print("load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}; after: {:.2f} {:.2f} {:.2f}"
          .format(*load_before, *load_after))
    peers = [r[1] for r in rows if r[1] and r[0].split()[0] in ("ebmkit", "TorchEBM")]
    fastest_peer = max(peers) if peers else None
    ours_rate = rows[0][1]
    print("| sampler | chain-steps/s | best time | ratio to shortrun |")
    print("|---|---:|---:|---:|")
    for name, rate, note in rows:
        if rate is None:
            print(f"| {name} | - | {note} | - |")
        else:
            print(f"| {name} | {rate:,.0f} | {note} | {ours_rate / rate:.2f}x |")
    if fastest_peer:
        print(f"shortrun / fastest peer = {ours_rate / fastest_peer:.2f}x")


if __name__ == "__main__":
    main()
