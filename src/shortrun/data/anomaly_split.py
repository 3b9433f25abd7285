"""Held-out-digit anomaly splits of MNIST-like data, and the validation split carved from them.

Three test protocols (``data.anomaly_split``):

- ``test``: train on the standard training split minus the held-out digit, test on the
  standard test split (anomalies ≈ 10 %);
- ``pooled``: the protocol as Zenati et al. (2018, §4.1) describe it in prose, on all 70k
  images in the order ``[train (60k), test (10k)]``: the normals are shuffled once with
  ``numpy.random.RandomState(seed)``, the first 80 % train, the test split is the other 20 %
  plus every image of the held-out digit (anomalies 33–39 %). It is **not** the split the
  papers' numbers were measured on: the pool order differs and the permutation is drawn once,
  not twice (below). The ``lebm_mnist_anomaly`` and ``damc_mnist_anomaly`` recipes use it;
  call it "the pooled split", never "the papers' split";
- ``zenati``, the papers' split: bit-exactly the test split of the loader the papers ran
  (Zenati et al.'s ``data/mnist.py``, copied unchanged by Kumar et al. 2019, whose numbers
  Pang et al. 2020 Table 4 compares with). Two details differ from the description. (1) The
  images are pooled
  in the order of that repository's ``mnist.npz``, ``[train (50k), test (10k), valid (10k)]``,
  which is ``[x_train[:50000], x_test, x_train[50000:]]`` of the standard files (the
  deeplearning.net split: its 50k/10k train/valid are the first and last images of the
  standard training set). (2) The permutation generator is one module-level
  ``RandomState(42)`` that the scripts draw from twice: ``get_train`` (normal permutation,
  test shuffle) then ``get_test`` (a *second* normal permutation, a second test shuffle). The
  test normals are therefore the last 20 % of a different permutation than the one the
  training set was cut from, and ≈ 80 % of them are training images. We reproduce that split
  to compare with the papers' numbers; ``pooled`` is the clean version of it.

Validation (:func:`carve_validation`): a normal slice and a second held-out digit, both taken
out of the *training* part only, so the test split stays bit-exactly the protocol's.
"""

from __future__ import annotations

import numpy as np
import torch

from shortrun.errors import ConfigError

TRAIN_FRACTION = 0.8
ZENATI_TRAIN_HEAD = 50_000  # the deeplearning.net train split: the first 50k training images


def _pooled_indices(y_all: torch.Tensor, digit: int, rng: np.random.RandomState
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """One call of the protocol on pooled labels: ``(train_idx, test_idx)`` into the pool,
    drawing the normal permutation and then the test shuffle from ``rng``."""
    normal = torch.nonzero(y_all != digit).reshape(-1)
    normal = normal[torch.from_numpy(rng.permutation(len(normal)))]
    cut = int(len(normal) * TRAIN_FRACTION)
    test_idx = torch.cat([normal[cut:], torch.nonzero(y_all == digit).reshape(-1)])
    # mixed, so that no evaluation batch is all anomalies
    test_idx = test_idx[torch.from_numpy(rng.permutation(len(test_idx)))]
    return normal[:cut], test_idx


def pooled_anomaly_split(x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor,
                         y_test: torch.Tensor, digit: int, seed: int = 42
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The held-out-digit split of Zenati et al. (2018, §4.1) as their text describes it (not
    what their loader, used by Kumar et al. 2019 and Pang et al. 2020 §5.4, produces: that is
    :func:`zenati_anomaly_split`): pool all images; the normal ones (every
    class but ``digit``) are shuffled with ``numpy.random.RandomState(seed)``, the first 80%
    train; the test split is the other 20% of them plus every image of ``digit``. Returns
    ``(x_train, y_train, x_test, y_test)``, the test split shuffled by the same generator."""
    x_all, y_all = torch.cat([x_train, x_test]), torch.cat([y_train, y_test])
    train_idx, test_idx = _pooled_indices(y_all, digit, np.random.RandomState(seed))
    return x_all[train_idx], y_all[train_idx], x_all[test_idx], y_all[test_idx]


def zenati_pool_order(n_train: int, n_test: int) -> torch.Tensor:
    """Indices into ``cat([train, test])`` in the order of the papers' ``mnist.npz``:
    ``[train[:50000], test, train[50000:]]``."""
    head = min(ZENATI_TRAIN_HEAD, n_train)
    return torch.cat([torch.arange(head), n_train + torch.arange(n_test),
                      torch.arange(head, n_train)])


def zenati_anomaly_split(x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor,
                         y_test: torch.Tensor, digit: int, seed: int = 42
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The split the papers' loader produces when run as their scripts run it (see the module
    docstring): training set from the first call, test set from the second call on the same
    generator. Same return shape as :func:`pooled_anomaly_split`."""
    order = zenati_pool_order(len(x_train), len(x_test))
    x_all, y_all = torch.cat([x_train, x_test])[order], torch.cat([y_train, y_test])[order]
    rng = np.random.RandomState(seed)
    train_idx, _ = _pooled_indices(y_all, digit, rng)   # get_train
    _, test_idx = _pooled_indices(y_all, digit, rng)    # get_test, same generator
    return x_all[train_idx], y_all[train_idx], x_all[test_idx], y_all[test_idx]


SPLITS = {"pooled": pooled_anomaly_split, "zenati": zenati_anomaly_split}


def carve_validation(x_train: torch.Tensor, y_train: torch.Tensor, val_digit: int,
                     fraction: float, seed: int
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validation for model and σ selection, never touching the test split.

    From the training part: every image of ``val_digit`` leaves training and becomes a
    validation anomaly; a ``fraction`` of the remaining normals, drawn with
    ``RandomState(seed)``, leaves training and becomes the validation normals. Returns
    ``(x_train, y_train, x_val, y_val)``; training keeps its order, the validation split is
    shuffled by the same generator."""
    if not 0.0 < fraction < 1.0:
        raise ConfigError(f"data.anomaly_val_fraction={fraction}: give a fraction in (0, 1) "
                          "of the training normals to hold out for validation")
    is_val_anomaly = y_train == val_digit
    if not bool(is_val_anomaly.any()):
        raise ConfigError(f"data.anomaly_val_digit={val_digit}: no training image has that "
                          "label; pick a digit that is in the training split")
    rng = np.random.RandomState(seed)
    normal = torch.nonzero(~is_val_anomaly).reshape(-1)
    normal = normal[torch.from_numpy(rng.permutation(len(normal)))]
    n_val = max(1, int(round(len(normal) * fraction)))
    keep = torch.sort(normal[n_val:]).values
    val_idx = torch.cat([normal[:n_val], torch.nonzero(is_val_anomaly).reshape(-1)])
    val_idx = val_idx[torch.from_numpy(rng.permutation(len(val_idx)))]
    return x_train[keep], y_train[keep], x_train[val_idx], y_train[val_idx]
