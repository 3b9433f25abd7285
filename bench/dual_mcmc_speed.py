"""Seconds per Dual-MCMC iteration on the CPU: shortrun vs a plain-PyTorch reference loop.

The reference restates the released script's per-batch update (Cui & Han 2023,
github.com/jcui1224/dual-MCMC, train.py) in plain PyTorch with its own hand-written Langevin
loops and the *same* networks and hyper-parameters, so the ratio measures what the library's
structure (one Langevin kernel, chain helpers, metrics) costs, not a difference in the model.

    .venv/bin/python bench/dual_mcmc_speed.py --recipes dual_mcmc_fashion dual_mcmc_mnist \
        --iters 5 --repeats 3 --threads 1

Iterations run on a fixed synthetic batch of the recipe's shape (the cost does not depend on
pixel values). Prints one markdown row per recipe: best-of-repeats s/iter and the ratio.
"""

from __future__ import annotations

import argparse
import time

import torch

from shortrun.data.base import DataInfo
from shortrun.models.base import OptimOptions
from shortrun.models.dual_mcmc import DualMCMC
from shortrun.train.config import resolve

SHAPES = {"mnist": (1, 28, 28), "fashion": (1, 28, 28), "cifar10": (3, 32, 32),
          "celeba64": (3, 64, 64)}


def reference_step(model: DualMCMC, x: torch.Tensor, opts: dict) -> None:
    """The script's order with explicit loops: G, then I, then E (no library helpers)."""
    m = model.options
    g, inf, ebm = model.generator, model.inference, model.ebm
    n = x.shape[0]
    z = torch.randn(n, m.nz)
    x_gen = g(z)
    mu, logvar = inf(x)
    zk = (mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)).detach()
    for _ in range(m.z_steps):
        zk.requires_grad_(True)
        u = ((x - g(zk)) ** 2).sum() / (2 * m.sigma**2) + (zk**2).sum() / 2
        (grad,) = torch.autograd.grad(u, zk)
        zk = (zk - 0.5 * m.z_step_size**2 * grad + m.z_noise * torch.randn_like(zk)).detach()

    def x_chain(xk):
        xk = xk.detach()
        for _ in range(m.x_steps):
            xk.requires_grad_(True)
            (grad,) = torch.autograd.grad(ebm(xk).sum(), xk)
            xk = (xk - 0.5 * m.x_step_size**2 * grad + m.x_noise * torch.randn_like(xk)).detach()
        return xk

    xk = x_chain(x_gen)
    loss_g = ((g(zk) - x) ** 2).sum() / n + m.s_factor * ((x_gen - xk) ** 2).sum() / n
    opts["generator"].zero_grad()
    loss_g.backward()
    opts["generator"].step()

    def nll(z, mu, lv):
        return (0.5 * lv + 0.5 * (z - mu) ** 2 / torch.exp(lv)).sum(1).mean()

    mu2, lv2 = inf(xk)
    loss_i = nll(zk, mu, logvar) + m.i_factor * nll(z, mu2, lv2)
    opts["inference"].zero_grad()
    loss_i.backward()
    opts["inference"].step()

    neg = x_chain(g(z).detach()) if m.resample_x else xk
    loss_e = (ebm(x).mean() - ebm(neg).mean()) / (m.x_noise / m.x_step_size) ** 2
    opts["ebm"].zero_grad()
    loss_e.backward()
    opts["ebm"].step()


def time_it(fn, iters: int, repeats: int) -> float:
    fn()  # warm-up (allocations, mkldnn primitive caches)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


def bench(recipe: str, iters: int, repeats: int, overrides: list[str]) -> tuple[float, float]:
    cfg = resolve(recipe, overrides)
    shape = SHAPES[cfg.data.name]
    info = DataInfo(shape=shape, kind="image", low=-1.0, high=1.0)
    torch.manual_seed(0)
    x = torch.rand(cfg.train.batch_size, *shape) * 2 - 1
    ours = DualMCMC.from_config(cfg.model, info)
    opt_ours = ours.configure_training(OptimOptions.from_train(cfg.train))
    ref = DualMCMC.from_config(cfg.model, info)
    opt_ref = ref.configure_training(OptimOptions.from_train(cfg.train))
    t_ours = time_it(lambda: ours.training_step(x, 0, opt_ours), iters, repeats)
    t_ref = time_it(lambda: reference_step(ref, x, opt_ref), iters, repeats)
    return t_ours, t_ref


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--recipes", nargs="+", default=["dual_mcmc_fashion", "dual_mcmc_mnist"])
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), best of {args.repeats} x "
          f"{args.iters} iterations\n")
    print("| recipe | shortrun s/iter | reference s/iter | ratio (shortrun / reference) |")
    print("|---|---|---|---|")
    for recipe in args.recipes:
        ours, ref = bench(recipe, args.iters, args.repeats, args.overrides)
        print(f"| {recipe} | {ours:.3f} | {ref:.3f} | {ours / ref:.2f} |", flush=True)


if __name__ == "__main__":
    main()
