"""Log-likelihoods with error bars: train a latent EBM prior (and the same generator with a
Gaussian prior) on your own data, then compare them by log p(x) on held-out points, with the
BDMC sandwich on simulated data saying how far to trust the numbers.

Run: python examples/log_likelihood.py [--steps N]   (small defaults: seconds on a CPU)
"""

import argparse

import torch
from torch import nn

import shortrun

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=100)
args = ap.parse_args()

# your data: 6-dimensional vectors near a curved 2-D sheet; the last 200 held out
torch.manual_seed(0)
u = torch.randn(1200, 2)
x = torch.cat([u, u[:, :1] ** 2, u.prod(1, keepdim=True), u.sin()], 1) / 2
x = x + 0.05 * torch.randn_like(x)
train, test = x[:1000], x[1000:]

# --- the user code --------------------------------------------------------------------------
results = {}
for prior in (shortrun.PriorTilt(2, 32), None):                       # EBM prior, Gaussian prior
    generator = nn.Sequential(nn.Linear(2, 64), nn.GELU(), nn.Linear(64, 6))
    model = shortrun.LEBM(generator, prior, nz=2, llhd_sigma=0.1, prior_steps=20,
                          post_steps=10)
    shortrun.fit(model, train, steps=args.steps, batch_size=100, lr=1e-3, progress=False)
    results[model.options.prior] = shortrun.log_likelihood(
        model, test, n_chains=8, n_betas=50, pilot_betas=20, n_simulated=20,
        log_z_samples=10_000, generator=torch.Generator().manual_seed(0))
# ---------------------------------------------------------------------------------------------

for prior, r in results.items():
    print(f"{prior:8s} log p(x) = {r['loglik']:.2f} ± {r['loglik_se']:.2f} nats "
          f"(log Z_α = {r['loglik_log_z_prior']:.2f} ± {r['loglik_log_z_prior_se']:.2f}); "
          f"sandwich on simulated data [{r['bdmc_lower']:.2f}, {r['bdmc_upper']:.2f}], "
          f"gap {r['bdmc_gap']:.3f}")
    assert r["loglik_se"] > 0 and r["bdmc_n"] == 20
