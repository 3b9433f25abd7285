"""scikit-learn's digits example (RBM features + logistic regression), end to end from Python:
``shortrun.sklearn.BernoulliRBM`` against ``sklearn.neural_network.BernoulliRBM`` side by side
in one process (issue 43).

    OMP_NUM_THREADS=1 SHORTRUN_DATA=/work/shared/data .venv/bin/python bench/sklearn_rbm.py

1. Time at the example's size (digits after an 80/20 split: 1,437 images of 64 pixels in
   [0, 1], 100 components, batch 10, n_iter 10, learning rate 0.06): the first
   ``shortrun.sklearn.BernoulliRBM().fit`` in a process where shortrun, torch and scikit-learn
   are already imported, then ``--calls`` more, each beside scikit-learn's ``fit``.
   ``--fresh-routes`` points the route cache at an empty folder first, as on a new machine.
2. Test accuracy of the pipeline (logistic regression, C = 6000) over ``--seeds`` seeds, the
   RBM's ``random_state`` = seed, the same split.
3. One epoch at MNIST's size (60,000 × 784 binarised, 500 components, batch 100, n_iter 1),
   ``--mnist-repeats`` times each, skipped with ``--no-mnist`` or when the data is absent.

The machine may be shared: compare the ratios, measured side by side, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def digits_split() -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import minmax_scale

    X, y = load_digits(return_X_y=True)
    X = minmax_scale(X, feature_range=(0, 1))
    return tuple(train_test_split(X, y, test_size=0.2, random_state=0))


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def example_rbm(cls, seed: int = 0):
    return cls(n_components=100, learning_rate=0.06, batch_size=10, n_iter=10,
               random_state=seed)


def accuracy(cls, seed: int, split) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    X_train, X_test, y_train, y_test = split
    pipe = Pipeline([("rbm", example_rbm(cls, seed)),
                     ("logistic", LogisticRegression(C=6000, max_iter=10_000))])
    pipe.fit(X_train, y_train)
    return float((pipe.predict(X_test) == y_test).mean())


def mnist_binary() -> np.ndarray | None:
    path = Path(os.environ.get("SHORTRUN_DATA", "/work/shared/data")) / "mnist.npz"
    if not path.is_file():
        return None
    with np.load(path) as f:
        return (f["x_train"].reshape(-1, 784) > 127.5).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3, help="fit calls after the first")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--mnist-repeats", type=int, default=2)
    ap.add_argument("--no-mnist", action="store_true")
    ap.add_argument("--fresh-routes", action="store_true",
                    help="an empty route cache, as on a new machine")
    ap.add_argument("--json", type=Path, help="write the numbers here too")
    args = ap.parse_args()
    if args.fresh_routes:
        os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="shortrun-bench-cache-")

    import torch  # noqa: F401  (imported before the timer, as the target states)
    from sklearn.neural_network import BernoulliRBM as SkRBM

    import shortrun  # noqa: F401
    from shortrun.hardware import cpu_machine
    from shortrun.sklearn import BernoulliRBM

    split = digits_split()
    X_train = split[0]
    out: dict = {"machine": cpu_machine(), "threads": torch.get_num_threads(),
                 "n_train": len(X_train), "calls": []}
    print(f"{out['machine']}, torch threads {out['threads']}, {len(X_train)} training images")
    for call in range(1 + args.calls):
        t_ours = timed(lambda: example_rbm(BernoulliRBM).fit(X_train))
        t_sk = timed(lambda: example_rbm(SkRBM).fit(X_train))
        out["calls"].append({"shortrun": t_ours, "sklearn": t_sk, "ratio": t_ours / t_sk})
        print(f"fit call {call + 1}: shortrun {t_ours:.3f} s, scikit-learn {t_sk:.3f} s, "
              f"ratio {t_ours / t_sk:.2f}", flush=True)

    acc = {"shortrun": [], "sklearn": []}
    for seed in range(args.seeds):
        acc["shortrun"].append(accuracy(BernoulliRBM, seed, split))
        acc["sklearn"].append(accuracy(SkRBM, seed, split))
        print(f"seed {seed}: test accuracy shortrun {acc['shortrun'][-1]:.4f}, scikit-learn "
              f"{acc['sklearn'][-1]:.4f}", flush=True)
    out["accuracy"] = acc
    print(f"mean test accuracy over {args.seeds} seeds: shortrun "
          f"{np.mean(acc['shortrun']):.4f}, scikit-learn {np.mean(acc['sklearn']):.4f}")

    x = None if args.no_mnist else mnist_binary()
    if x is not None:
        rows = []
        kw = dict(n_components=500, learning_rate=0.01, batch_size=100, n_iter=1,
                  random_state=0)
        for _ in range(args.mnist_repeats):
            t_ours = timed(lambda: BernoulliRBM(**kw).fit(x))
            t_sk = timed(lambda: SkRBM(**kw).fit(x))
            rows.append({"shortrun": t_ours, "sklearn": t_sk, "speedup": t_sk / t_ours})
            print(f"MNIST epoch: shortrun {t_ours:.2f} s, scikit-learn {t_sk:.2f} s, "
                  f"shortrun {t_sk / t_ours:.2f}x faster", flush=True)
        out["mnist"] = rows
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
