"""``make bench`` rows for the RBM: a CD-1 epoch on MNIST and ``rbm_digits`` trained through the
Trainer (what ``shortrun train`` runs), each against scikit-learn's BernoulliRBM doing the same
updates on the same float32 data, and the exact log Z of a 784 × 20 RBM.

Through the Trainer, the timer covers what a user pays per step: drawing the minibatch by
index from the data tensor, the model's update with its logged free energies, the metrics
logger at the recipe's ``log_every``, checkpoints. Outside it: importing, loading and
binarising the data, building the model (``shortrun train`` pays those once per run).
scikit-learn's timer covers ``fit`` on the array it is handed. Progress output is off.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from rbm_logz import make_rbm, plain_enumeration
from speed_common import Row, best, interleave, not_run, spread, threads

from shortrun.estimators.exact import log_partition
from shortrun.train.config import resolve
from shortrun.train.trainer import Trainer

CD1_NAME = "CD-1 epoch MNIST 784x500 batch 100 (shortrun train)"
DIGITS_NAME = "rbm_digits training (shortrun train rbm_digits)"
LOGZ_NAME = "exact log Z 784x20"


def mnist_available() -> str | None:
    """Why the MNIST rows cannot run here, or None."""
    root = os.environ.get("SHORTRUN_DATA")
    if not root:
        return "SHORTRUN_DATA is not set (needs mnist.npz)"
    if not (Path(root) / "mnist.npz").is_file():
        return f"SHORTRUN_DATA={root} has no mnist.npz"
    return None


def trainer_run(recipe: str, overrides: list[str], skip_final_draw: bool):
    """A run (returns seconds of ``Trainer.fit``) of ``recipe`` in a fresh temporary run dir,
    and the data that run trained on (for scikit-learn)."""
    seen: dict[str, np.ndarray] = {}

    def run() -> float:
        cfg = resolve(recipe, [*overrides, "train.progress=false"])
        with tempfile.TemporaryDirectory(prefix="shortrun-bench-") as d:
            trainer = Trainer(cfg, Path(d) / "run")
            if skip_final_draw:  # a per-run picture, not part of an epoch
                trainer.draw = lambda: None  # type: ignore[method-assign]
            seen.setdefault("x", trainer.data.train.reshape(len(trainer.data.train), -1)
                            .float().numpy().copy())
            t = time.perf_counter()
            trainer.fit()
            dt = time.perf_counter() - t
            trainer.close()
        return dt

    return run, seen


def sklearn_run(seen: dict[str, np.ndarray], **options):
    from sklearn.neural_network import BernoulliRBM

    def run() -> float:
        rbm = BernoulliRBM(random_state=0, **options)
        t = time.perf_counter()
        rbm.fit(seen["x"])
        return time.perf_counter() - t

    return run


def _label(n: int, default: int) -> str:
    return f"{n} thread{'s' if n > 1 else ''}" + (" (default)" if n == default else "")


def cd1_rows(thread_counts: list[int], default: int, repeats: int, quick: bool) -> list[Row]:
    """CD-1 epoch, 784 × 500, batch 100, lr 0.01 (the rbm_mnist recipe with 500 CD-1 hidden
    units and its logging cadence) against BernoulliRBM(500, lr 0.01, batch 100, n_iter 1)."""
    why = mnist_available()
    if why:
        return [not_run(f"{CD1_NAME}, {_label(n, default)}", str(n), why, "≥ 2× scikit-learn")
                for n in thread_counts]
    length = ["train.steps=20", "data.n_train=2000"] if quick else ["train.epochs=1"]
    rows = []
    for n in thread_counts:
        pin = [] if n == default else [f"train.threads={n}"]
        ours, seen = trainer_run("rbm_mnist", ["model.n_hidden=500", "model.learning=cd",
                                               "model.k=1", "train.lr=0.01",
                                               "train.batch_size=100", *length, *pin], True)
        with threads(n):
            times = interleave({"shortrun": ours, "scikit-learn": sklearn_run(
                seen, n_components=500, learning_rate=0.01, batch_size=100, n_iter=1)},
                repeats, warmup=not quick)
        rows.append(Row(f"{CD1_NAME}, {_label(n, default)}", str(n), best(times["shortrun"]),
                        best(times["scikit-learn"]), "scikit-learn BernoulliRBM, float32",
                        target="≥ 2× scikit-learn (default threads)",
                        notes=[f"{len(seen['x'])} images; shortrun s {spread(times['shortrun'])}"
                               f"; scikit-learn s {spread(times['scikit-learn'])}; the "
                               "end-of-run sample grid is not timed"],
                        runs=times))
    return rows


def digits_rows(default: int, repeats: int, quick: bool) -> list[Row]:
    """The whole rbm_digits training (100 epochs, PCD-1, batch 50, lr 0.05, 20 hidden, its
    sample grids and checkpoints) against BernoulliRBM(20, lr 0.05, batch 50, n_iter 100);
    then the same training with scikit-learn's update: no centering, no momentum, and as many
    persistent chains as the batch has rows (BernoulliRBM keeps one per row)."""
    epochs = 2 if quick else 100
    rows = []
    for label, extra in (("", []),
                         (" with scikit-learn's update (no centering, no momentum, 50 chains)",
                          ["model.centering=false", "model.momentum=0.0",
                           "model.n_chains=50"])):
        ours, seen = trainer_run("rbm_digits", [f"train.epochs={epochs}", *extra], False)
        with threads(default):
            times = interleave({"shortrun": ours, "scikit-learn": sklearn_run(
                seen, n_components=20, learning_rate=0.05, batch_size=50, n_iter=epochs)},
                repeats, warmup=not quick)
        rows.append(Row(f"{DIGITS_NAME}{label}, {_label(default, default)}", str(default),
                        best(times["shortrun"]), best(times["scikit-learn"]),
                        "scikit-learn BernoulliRBM, same updates", target="≥ 1× scikit-learn",
                        notes=[f"{len(seen['x'])} images × {epochs} epochs; shortrun s "
                               f"{spread(times['shortrun'])} (includes its sample grids and "
                               f"checkpoints); scikit-learn s {spread(times['scikit-learn'])}"],
                        runs=times))
    return rows


def logz_rows(thread_counts: list[int], default: int, repeats: int, quick: bool) -> list[Row]:
    """Exact log Z by enumerating 2^20 hidden states, float32, against a plain float32
    enumeration in the same run; accuracy against a float64 enumeration."""
    why = mnist_available()
    hidden = 12 if quick else 20
    name = LOGZ_NAME if not quick else f"{LOGZ_NAME} (quick: 784x{hidden})"
    if why:
        return [not_run(f"{name}, {_label(n, default)}", str(n), why, "< 2 s, rel. err 1e-5")
                for n in thread_counts]
    p = make_rbm(hidden)
    exact = float(log_partition(p, torch.float64))
    rows = []
    value: dict[str, float] = {}

    def ours() -> float:
        t = time.perf_counter()
        value["ours"] = float(log_partition(p))
        return time.perf_counter() - t

    def plain() -> float:
        t = time.perf_counter()
        value["plain"] = plain_enumeration(p)
        return time.perf_counter() - t

    for n in thread_counts:
        with threads(n):
            times = interleave({"shortrun": ours, "plain": plain}, repeats, warmup=False)
        err = abs(value["ours"] - exact) / abs(exact)
        err_plain = abs(value["plain"] - exact) / abs(exact)
        rows.append(Row(f"{name}, {_label(n, default)}", str(n), best(times["shortrun"]),
                        best(times["plain"]), "plain chunked float32 torch enumeration",
                        target="< 2 s, rel. err ≤ 1e-5",
                        notes=[f"relative error vs float64: shortrun {err:.1e}, plain "
                               f"{err_plain:.1e}; shortrun s {spread(times['shortrun'])}"],
                        runs=times))
    return rows
