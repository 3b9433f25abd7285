"""The DAMC amortizer's draw (Yu et al. 2023: 100 ancestral steps of the noise net, one condition
for all of them) by :meth:`NoiseNet.conditioned`, which computes the condition's share of every
context projection once per draw and a noise level shared by all rows once per step, against
the same draw through the plain per-step forward (the whole ``[time; condition]`` context
projected at every step, as the authors' code does). Same networks, same generator seed,
interleaved, best of ``--repeats``; the two draws agree to float rounding
(tests/models/test_damc_nets.py).

    python bench/damc_draw_speed.py --threads 1 --repeats 5

Sizes: the CPU recipes ``damc_mnist_anomaly`` (nz 8, width 32, condition 128, batch 128) and
``damc_mnist`` (nz 32, batch 100), and the paper's SVHN/CIFAR-10 nets (width 128, condition
1024, nz 100, batch 128). Posterior draws (``q(z | x)``, one condition per row) and prior draws
(``q(z)``, the null condition: one row for all).
"""

from __future__ import annotations

import argparse

import torch
from speed_common import interleave, timed

from shortrun.hardware import cpu_model, cpu_signature
from shortrun.models.damc_nets import LatentDiffusionAmortizer, make_encoder
from shortrun.samplers.diffusion import ancestral_sample

SIZES = {  # name: (image shape, nz, condition width, noise-net width, encoder width, batch)
    "damc_mnist_anomaly": ((1, 28, 28), 8, 128, 32, 8, 128),
    "damc_mnist": ((1, 28, 28), 32, 128, 32, 8, 100),
    "paper svhn/cifar10 nets": ((3, 32, 32), 100, 1024, 128, 64, 128),
}


def compare(name: str, repeats: int, steps: int) -> str:
    shape, nz, emb, width, nif, batch = SIZES[name]
    torch.manual_seed(0)
    amortizer = LatentDiffusionAmortizer(nz, make_encoder(shape, "image", emb, nif), emb, width,
                                         n_steps=steps)
    x = torch.randn(batch, *shape)
    net, lo, hi = amortizer.net, amortizer.logsnr_min, amortizer.logsnr_max
    with torch.no_grad():
        cond = amortizer.condition(x, batch)
        sides = {k: timed(fn) for k, fn in {
            "posterior, per-step forward": lambda: ancestral_sample(
                lambda z, lam: net(z, lam, cond), batch, nz, steps, lo, hi),
            "posterior, conditioned": lambda: ancestral_sample(
                net.conditioned(cond), batch, nz, steps, lo, hi),
            "prior, per-step forward": lambda: ancestral_sample(
                lambda z, lam: net(z, lam, amortizer.null.expand(batch, -1)), batch, nz, steps,
                lo, hi),
            "prior, conditioned": lambda: ancestral_sample(
                net.conditioned(amortizer.null), batch, nz, steps, lo, hi),
        }.items()}
        # interleaved after a warm-up: a drift of the machine hits every side alike
        best = {k: min(ts) for k, ts in interleave(sides, repeats).items()}
    post = best["posterior, per-step forward"] / best["posterior, conditioned"]
    prior = best["prior, per-step forward"] / best["prior, conditioned"]
    return (f"| {name} | {best['posterior, conditioned'] * 1e3:.1f} / "
            f"{best['posterior, per-step forward'] * 1e3:.1f} ms = **{post:.2f}×** | "
            f"{best['prior, conditioned'] * 1e3:.1f} / {best['prior, per-step forward'] * 1e3:.1f}"
            f" ms = **{prior:.2f}×** |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=100, help="sampler steps (the paper's 100)")
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{cpu_model()} ({cpu_signature()}); torch {torch.__version__}; {args.threads} "
          f"thread(s); {args.steps} sampler steps; best of {args.repeats}, interleaved")
    print("| sizes | posterior draw: conditioned / per-step forward | prior draw: same |")
    print("|---|---|---|")
    for name in args.sizes:
        print(compare(name, args.repeats, args.steps), flush=True)


if __name__ == "__main__":
    main()
