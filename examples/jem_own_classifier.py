"""Your own classifier as a JEM on your own labelled 2-D data, with unlabelled extras:
predict, p(y|x), an out-of-distribution score, and samples of one class.

Run: python examples/jem_own_classifier.py [--steps N]   (small defaults: seconds on a CPU)
"""

import argparse

import torch
from torch import nn

import shortrun

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=200)
args = ap.parse_args()

# your data: three labelled blobs, and 300 points without labels drawn from the same blobs
torch.manual_seed(0)
centres = torch.tensor([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
y = torch.arange(600) % 3
x = centres[y] + 0.4 * torch.randn(600, 2)
x_unlabelled = centres[torch.arange(300) % 3] + 0.4 * torch.randn(300, 2)

# --- the user code --------------------------------------------------------------------------
classifier = nn.Sequential(nn.Linear(2, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(),
                           nn.Linear(64, 3))     # (B, 2) -> logits (B, 3)
jem = shortrun.JEM(classifier, n_classes=3, buffer_size=1000, langevin_steps=20,
                   step_size=0.1, noise_scale=1.0, init_scale=3.0, energy_reg=0.01)
shortrun.fit(jem, x, labels=y, unlabelled=x_unlabelled, steps=args.steps, batch_size=64,
             lr=1e-3, progress=False)
probs = jem.predict_proba(x[:5])                 # p(y|x), rows sum to 1
far = jem.ood_score(torch.tensor([[8.0, 8.0]]))  # E(x): higher = less like the data
ones = jem.sample(200, y=1, steps=100)           # Langevin on E(x, y=1)
# ---------------------------------------------------------------------------------------------

accuracy = float((jem.predict(x) == y).float().mean())
near = float(jem.ood_score(x).mean())
print(f"accuracy {accuracy:.3f}; E(x) on the data {near:.2f}, far away {float(far):.2f}; "
      f"class-1 samples centred at {ones.mean(0).tolist()}")
assert probs.shape == (5, 3) and ones.shape == (200, 2) and bool(torch.isfinite(ones).all())
