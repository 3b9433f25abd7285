"""A Bernoulli RBM on your own NumPy array: fit, transform, log-likelihood, sample.

Run: python examples/rbm_numpy.py [--steps N]   (small defaults: a few seconds on a CPU)
"""

import argparse

import numpy as np

import shortrun

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=300)
args = ap.parse_args()

# your data: 500 binary vectors of 16 pixels, two noisy prototypes
rng = np.random.default_rng(0)
prototypes = np.array([[1] * 8 + [0] * 8, [0] * 8 + [1] * 8])
x = (prototypes[rng.integers(0, 2, 500)] ^ (rng.random((500, 16)) < 0.1)).astype(np.float32)

# --- the user code --------------------------------------------------------------------------
rbm = shortrun.BernoulliRBM(n_hidden=8, learning="pcd", k=1)
shortrun.fit(rbm, x, steps=args.steps, batch_size=50, lr=0.05, progress=False)
features = rbm.transform(x[:5])          # hidden probabilities, (5, 8)
loglik = rbm.log_likelihood(x)           # mean log p(v), exact log Z (8 hidden units)
samples = rbm.sample(10)                 # (10, 16) in {0, 1}
# ---------------------------------------------------------------------------------------------

print(f"features {tuple(features.shape)}, mean log-likelihood {loglik:.3f} nats, "
      f"samples {tuple(samples.shape)}")
assert features.shape == (5, 8) and np.isfinite(loglik) and samples.shape == (10, 16)
