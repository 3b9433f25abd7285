"""Your own nn.Module energy on your own 2-D data: Langevin + replay buffer, then samples.

Run: python examples/ebm_own_energy.py [--steps N]   (small defaults: seconds on a CPU)
"""

import argparse
import math

import torch
from torch import nn

import shortrun

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=100)
args = ap.parse_args()

# your data: a noisy ring of radius 2
torch.manual_seed(0)
angle = torch.rand(2000) * 2 * math.pi
x = torch.stack([angle.cos(), angle.sin()], 1) * 2 + 0.1 * torch.randn(2000, 2)


# --- the user code --------------------------------------------------------------------------
class Energy(nn.Module):  # (B, 2) -> (B,); lower energy = more probable
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(),
                                 nn.Linear(64, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


model = shortrun.EBM(Energy(), chain="buffer", buffer_size=2000, langevin_steps=20,
                     step_size=0.1, init_scale=3.0)
shortrun.fit(model, x, steps=args.steps, batch_size=128, lr=1e-3, progress=False)
samples = model.sample(500)             # (500, 2), Langevin from fresh noise
# ---------------------------------------------------------------------------------------------

radius = samples.norm(dim=1)
print(f"samples {tuple(samples.shape)}, mean radius {float(radius.mean()):.2f} (data: 2.00)")
assert samples.shape == (500, 2) and bool(torch.isfinite(samples).all())
