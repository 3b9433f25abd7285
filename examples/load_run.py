"""Loading runs from Python: a recipe run, your own-network run, a lone checkpoint file.

Run: python examples/load_run.py [--steps N]   (small defaults: seconds on a CPU)
"""

import argparse
import tempfile
from pathlib import Path

import torch
from torch import nn

import shortrun

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=30)
args = ap.parse_args()
tmp = Path(tempfile.mkdtemp())


class Energy(nn.Module):  # (B, 2) -> (B,)
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 32), nn.SiLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


# two runs to load: a recipe run (what `shortrun train rbm_digits --out DIR` makes, here built
# with make_config) and a run of your own energy trained with shortrun.fit
cfg = shortrun.make_config(model={"name": "rbm", "n_hidden": 16},
                           data={"name": "digits", "binarize": True},
                           train={"steps": args.steps, "batch_size": 50, "progress": False})
shortrun.Trainer(cfg, tmp / "rbm").fit()
shortrun.fit(shortrun.EBM(Energy(), langevin_steps=10), torch.randn(500, 2), steps=args.steps,
             batch_size=50, run_dir=tmp / "mine", progress=False)

# --- the user code --------------------------------------------------------------------------
rbm = shortrun.load(tmp / "rbm")                                   # rebuilt from its config
digits = rbm.sample(8)                                             # (8, 1, 8, 8) in {0, 1}
ebm = shortrun.load(tmp / "mine", energy=Energy())                 # your network, by keyword
same = shortrun.load(tmp / "mine" / "checkpoints" / "last.pt", energy=Energy())  # lone file
points = ebm.sample(100)                                           # (100, 2)
# ---------------------------------------------------------------------------------------------

print(f"rbm samples {tuple(digits.shape)}, ebm samples {tuple(points.shape)}")
assert digits.shape == (8, 1, 8, 8) and points.shape == (100, 2)
assert all(torch.equal(a, b) for a, b in zip(ebm.state_dict().values(),
                                             same.state_dict().values(), strict=True))
