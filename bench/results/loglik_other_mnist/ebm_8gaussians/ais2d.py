"""2-D check (bench/README.md, issue 41): the AIS log-likelihood of a trained ebm_8gaussians
over all its test points against grid values, at RUNS AIS runs per estimate, ESTIMATES
independent estimates, for each number of distributions in K (default 800,1600,3200); a
fifth argument skips the grid lines.

    OMP_NUM_THREADS=1 python ais2d.py RUN_DIR RUNS ESTIMATES [K] [skip]
"""
import math
import sys
import time

import torch

from shortrun.data.registry import load_data
from shortrun.estimators.annealing import AISSettings, ais_log_partition
from shortrun.estimators.bases import GaussianBase
from shortrun.estimators.grid import grid_metrics, make_grid, plot_half_width
from shortrun.run import load_run

run = load_run(sys.argv[1])
model, cfg = run.model, run.cfg
model.eval()
data = load_data(cfg.data)
energy = model.density_energy()
test = data.test
half = plot_half_width(data)
with torch.no_grad():
    neg_e = -energy(test).double()
skip_grid = len(sys.argv) > 5
print("half", half, "n_test", len(test), "inside", int((test.abs() < half).all(1).sum()))
print("grid metrics (eval's loglik_grid):", grid_metrics(energy, data, ["loglik_grid"]))
for n, w in [] if skip_grid else [(400, half), (1600, half), (1600, 2 * half), (2400, 3 * half)]:
    xy, area = make_grid(w, n)
    with torch.no_grad():
        ne = torch.cat([-energy(xy[i:i + 40000]).double() for i in range(0, len(xy), 40000)])
    log_z = float(torch.logsumexp(ne, 0) + math.log(area))
    print(f"grid n={n} half={w:.2f}: log Z {log_z:.5f}  "
          f"mean -E(x)-logZ {float(neg_e.mean()) - log_z:.5f}")
base = GaussianBase.fit(data.train[:10_000])
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 100
for k in [int(v) for v in (sys.argv[4] if len(sys.argv) > 4 else "800,1600,3200").split(",")]:
    vals = []
    t = time.process_time()
    for seed in range(int(sys.argv[3]) if len(sys.argv) > 3 else 5):
        est = ais_log_partition(energy, base, runs, AISSettings(n_betas=k),
                                generator=torch.Generator().manual_seed(seed))
        vals.append((float(neg_e.mean()) - est.log_z, est.stderr, est.ess, est.accept))
    ll = torch.tensor([v[0] for v in vals])
    print(f"K={k} R={runs}: loglik per seed {[round(v[0], 4) for v in vals]} "
          f"SE {[round(v[1], 4) for v in vals]} ess {[round(v[2], 1) for v in vals]} "
          f"mean {float(ll.mean()):.4f} sd {float(ll.std()):.4f} accept {vals[0][3]:.2f} "
          f"cpu {time.process_time() - t:.1f}s", flush=True)
