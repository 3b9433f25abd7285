"""Dual-MCMC teaching (Cui & Han 2023) with your own EBM, generator and encoder on images.

Run: python examples/dual_mcmc_own_networks.py [--steps N]   (small defaults: seconds on a CPU)
"""

import argparse

import torch
from torch import nn

import shortrun

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=30)
args = ap.parse_args()

# your data: 8x8 one-channel images in [-1, 1], one bright horizontal bar each
torch.manual_seed(0)
x = -torch.ones(1000, 1, 8, 8)
x[torch.arange(1000), 0, torch.randint(0, 8, (1000,)), :] = 1.0


class Encoder(nn.Module):  # q(z|x): (B, 1, 8, 8) -> (mean, logvar), each (B, nz)
    def __init__(self, nz):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 2 * nz))

    def forward(self, x):
        return self.net(x).chunk(2, dim=1)


# --- the user code --------------------------------------------------------------------------
nz = 8
ebm = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 1), nn.Flatten(0))
generator = nn.Sequential(nn.Linear(nz, 64), nn.SiLU(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Unflatten(1, (1, 8, 8)))
model = shortrun.DualMCMC(ebm, generator, Encoder(nz), nz=nz, x_steps=5, z_steps=5)
shortrun.fit(model, x, steps=args.steps, batch_size=50, lr=1e-3, progress=False)
samples = model.sample(16)              # EBM-revised generator samples, (16, 1, 8, 8)
recon = model.reconstruct(x[:4])        # g(z̃), z̃ from the z-chain started at q(z|x)
# ---------------------------------------------------------------------------------------------

print(f"samples {tuple(samples.shape)}, reconstruction MSE "
      f"{float((recon - x[:4]).pow(2).mean()):.3f}")
assert samples.shape == (16, 1, 8, 8) and recon.shape == (4, 1, 8, 8)
