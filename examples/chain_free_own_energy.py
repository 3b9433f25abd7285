"""Your own nn.Module energy trained without a chain: noise-contrastive estimation and energy
discrepancy on your own 2-D data, scored by the exact (grid) log-likelihood of held-out points.

Run: python examples/chain_free_own_energy.py [--steps N]   (small defaults: seconds on a CPU)
"""

import argparse
import math

import torch
from torch import nn

import shortrun
from shortrun.estimators.grid import make_grid
from shortrun.objectives.nce import GaussianNoise

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=1500)
args = ap.parse_args()

# your data: four Gaussian blobs (std 0.3) at (±2, ±2); the last 500 points held out
torch.manual_seed(0)
centres = torch.tensor([[2.0, 2.0], [2.0, -2.0], [-2.0, 2.0], [-2.0, -2.0]])
points = centres[torch.randint(4, (3000,))] + 0.3 * torch.randn(3000, 2)
x, held_out = points[:2500], points[2500:]


# --- the user code --------------------------------------------------------------------------
class Energy(nn.Module):  # (B, 2) -> (B,); lower energy = more probable
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(),
                                 nn.Linear(64, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


# NCE: logistic regression of the data against a noise that covers it (here a Gaussian fitted
# to the data, 1.5x wider); it learns log Z as the parameter model.log_z
nce = shortrun.NCE(Energy(), noise=GaussianNoise.fit(x, scale=1.5), noise_ratio=4)
shortrun.fit(nce, x, steps=args.steps, batch_size=256, lr=2e-3, progress=False)

# energy discrepancy: each point against M = 16 Gaussian perturbations (variance t per step);
# no noise model, no chain, no log Z
ed = shortrun.ED(Energy(), ed_t=0.5, ed_m=16, ed_w=1.0)
shortrun.fit(ed, x, steps=args.steps, batch_size=256, lr=2e-3, progress=False)
# ---------------------------------------------------------------------------------------------

# in 2-D a fine grid gives log Z exactly enough: log p(x) = -E(x) - log Z on held-out points
grid, area = make_grid(4.5, 300)
truth = torch.logsumexp(torch.distributions.Normal(centres, 0.3).log_prob(
    held_out[:, None]).sum(-1), 1) - math.log(4)
print(f"held-out log-likelihood (nats): truth {float(truth.mean()):.3f}")
with torch.no_grad():
    for name, model in (("nce", nce), ("ed", ed)):
        energy = model.density_energy()
        log_z = float(torch.logsumexp(-energy(grid).double(), 0)) + math.log(area)
        loglik = float(-energy(held_out).mean()) - log_z
        learned = f", learned log Z {float(nce.log_z):.3f}" if model is nce else ""
        print(f"  {name}: {loglik:.3f} (grid log Z {log_z:.3f}{learned})")
        assert math.isfinite(loglik)
