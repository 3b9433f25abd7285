"""The latent EBM prior (Pang et al. 2020) over your own generator: train, then sample,
reconstruct and score anomalies on new data.

Run: python examples/lebm_own_generator.py [--steps N]   (small defaults: seconds on a CPU)
"""

import argparse

import torch
from torch import nn

import shortrun

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=100)
args = ap.parse_args()

# your data: 8-dimensional vectors near a 2-D plane, and a few far-off ones to score later
torch.manual_seed(0)
basis = torch.randn(2, 8)
x = torch.randn(2000, 2) @ basis + 0.05 * torch.randn(2000, 8)
x_new = torch.cat([torch.randn(5, 2) @ basis, 3 * torch.randn(5, 8)])  # 5 normal, 5 odd

# --- the user code --------------------------------------------------------------------------
nz = 4
generator = nn.Sequential(nn.Linear(nz, 64), nn.GELU(), nn.Linear(64, 8))   # (B, nz) -> (B, 8)
prior = shortrun.PriorTilt(nz, 32)                                          # f_α(z): (B,)
model = shortrun.LEBM(generator, prior, nz=nz, llhd_sigma=0.3, prior_steps=20, post_steps=10)
shortrun.fit(model, x, steps=args.steps, batch_size=100, lr=1e-3, progress=False)
samples = model.sample(16)               # (16, 8): g(z), z from the short-run prior chain
recon = model.reconstruct(x_new)          # g(z), z from the short-run posterior chain
scores = model.anomaly_score(x_new)       # −log p(x, z); higher = more anomalous
# ---------------------------------------------------------------------------------------------

print(f"samples {tuple(samples.shape)}, reconstruction MSE "
      f"{float((recon[:5] - x_new[:5]).pow(2).mean()):.3f}, anomaly scores normal "
      f"{scores[:5].mean():.1f} vs odd {scores[5:].mean():.1f}")
assert samples.shape == (16, 8) and recon.shape == x_new.shape and scores.shape == (10,)
