"""``EBMDensity``: the data-space EBM as a density estimator in the shape of scikit-learn's
``KernelDensity`` (``fit``, ``score_samples``, ``score``, ``sample``).

An MLP energy ``E(z)`` is trained by maximum likelihood with Langevin chains from a replay
buffer (Du & Mordatch 2019; :class:`shortrun.models.ebm.EBM`, trained by ``shortrun.fit`` in
memory) on the standardised data ``z = (x − m) / s``. Then ``p(x) = exp(−E(z) − log Z) / Πs``,
so ``log p(x) = −E(z) − log Z − Σ log s``.

``score_samples`` needs ``log Z``, estimated once at the end of ``fit``. For 2-D data it is
the grid estimator of :mod:`shortrun.estimators.grid` (a ``grid_size × grid_size`` grid over
the training data's box, widened by 15% a side); for other dimensions it is annealed
importance sampling from ``N(0, I)`` in the standardised coordinates (Neal 2001;
:func:`shortrun.estimators.annealing.ais_log_partition`, ``AIS_RUNS`` runs over ``AIS_BETAS``
distributions, a fixed seed so that scores are repeatable), whose standard error is
``log_z_se_``. AIS's ``log Z`` is biased low in expectation (Jensen), so ``log p(x)`` is biased
high by about that much. ``sample`` needs no ``Z``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from shortrun.data.base import DataInfo, LoadedData
from shortrun.energies.mlp import MLPEnergy
from shortrun.estimators.annealing import AISSettings, ais_log_partition
from shortrun.estimators.bases import GaussianBase
from shortrun.estimators.grid import make_grid
from shortrun.models.ebm import EBM
from shortrun.sklearn._common import default_dtype, seeded, torch_device, torch_dtype
from shortrun.train.fit import fit

# the standardised data's box is widened by this fraction of its half-width for the grid
GRID_MARGIN = 0.15
#: AIS runs and intermediate distributions of the normaliser in dimensions other than 2
AIS_RUNS, AIS_BETAS = 64, 400


class EBMDensity(BaseEstimator):
    """Energy-based density estimator: ``EBMDensity(hidden=64, depth=2, steps=500, ...)``.

    ``steps`` updates of Adam at ``learning_rate`` on batches of ``batch_size``; the chains run
    ``langevin_steps`` steps of size ``step_size`` (shortrun's ``model.*`` options of the same
    names). ``grid_size``: points per axis of the 2-D normaliser. ``device``/``dtype``: where
    and in what the energy trains."""

    def __init__(self, hidden: int = 64, depth: int = 2, *, steps: int = 500,
                 learning_rate: float = 1e-3, batch_size: int = 128, langevin_steps: int = 20,
                 step_size: float = 0.1, buffer_size: int = 10_000, grid_size: int = 200,
                 random_state: Any = None, device: str = "cpu", dtype: str = "float32"
                 ) -> None:
        self.hidden = hidden
        self.depth = depth
        self.steps = steps
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.langevin_steps = langevin_steps
        self.step_size = step_size
        self.buffer_size = buffer_size
        self.grid_size = grid_size
        self.random_state = random_state
        self.device = device
        self.dtype = dtype

    def fit(self, X: Any, y: Any = None) -> EBMDensity:
        """Train the energy on ``X`` (n_samples, n_features); ``y`` is ignored."""
        X = validate_data(self, X, dtype=(np.float64, np.float32))
        dtype = torch_dtype(self.dtype, "EBMDensity")
        device = torch_device(self.device, "EBMDensity")
        self.mean_ = X.mean(axis=0)
        scale = X.std(axis=0)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        z = torch.from_numpy(self._standardise(X)).to(dtype)
        rng = check_random_state(self.random_state)
        with seeded(rng), default_dtype(dtype):
            energy = MLPEnergy(X.shape[1], hidden=self.hidden, depth=self.depth)
            model = EBM(energy, langevin_steps=self.langevin_steps, step_size=self.step_size,
                        buffer_size=self.buffer_size, init_scale=3.0).to(dtype)
            data = LoadedData(train=z, info=DataInfo((X.shape[1],), "vector"))
            fit(model, data, steps=self.steps, batch_size=min(self.batch_size, len(z)),
                      lr=self.learning_rate, seed=int(rng.randint(0, 2**31 - 1)),
                      device=str(device), progress=False, log_every=max(self.steps, 1))
        self.model_ = model
        if X.shape[1] == 2:
            self.log_z_, self.log_z_se_ = self._grid_log_z(z), 0.0
        else:
            self.log_z_, self.log_z_se_ = self._ais_log_z(X.shape[1])
        return self

    def _standardise(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean_) / self.scale_

    @torch.no_grad()
    def _energy(self, z: np.ndarray) -> np.ndarray:
        p = next(self.model_.parameters())
        e = self.model_.energy(torch.from_numpy(np.ascontiguousarray(z)).to(p))
        return e.double().cpu().numpy()

    @torch.no_grad()
    def _grid_log_z(self, z: torch.Tensor) -> float:
        """``log Z`` of ``exp(−E)`` on a square grid over the data's box (2-D only)."""
        half = float(z.abs().max()) * (1 + GRID_MARGIN) or 1.0
        xy, area = make_grid(half, self.grid_size)
        neg_e = -torch.from_numpy(self._energy(xy.numpy()))
        return float(torch.logsumexp(neg_e, 0)) + math.log(area)

    def _ais_log_z(self, dim: int) -> tuple[float, float]:
        """``log Z`` of ``exp(−E)`` by AIS from ``N(0, I)`` (the standardised data's scale), in
        float64 whatever the energy's dtype."""
        p = next(self.model_.parameters())

        def energy(u: torch.Tensor) -> torch.Tensor:
            return self.model_.energy(u.to(p.dtype)).double()

        base = GaussianBase.standard((dim,), dtype=torch.float64, device=p.device)
        est = ais_log_partition(energy, base, AIS_RUNS, AISSettings(n_betas=AIS_BETAS),
                                generator=torch.Generator(p.device).manual_seed(0))
        return est.log_z, est.stderr

    def score_samples(self, X: Any) -> np.ndarray:
        """``log p(x)`` per row (nats), with ``log Z`` from the grid (2-D) or AIS (see the
        module doc; its standard error is ``log_z_se_``)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=(np.float64, np.float32), reset=False)
        log_jac = float(np.log(self.scale_).sum())
        return -self._energy(self._standardise(X)) - self.log_z_ - log_jac

    def score(self, X: Any, y: Any = None) -> float:
        """Total ``log p(x)`` over the rows (as ``KernelDensity.score``)."""
        return float(self.score_samples(X).sum())

    def sample(self, n_samples: int = 1, random_state: Any = None) -> np.ndarray:
        """``n_samples`` draws by the model's own sampler (Langevin from noise), in the data's
        scale, (n_samples, n_features)."""
        check_is_fitted(self)
        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) \
                or n_samples < 1:
            raise ValueError(f"EBMDensity.sample: n_samples must be a positive integer; got "
                             f"{n_samples!r}")
        rng = check_random_state(random_state)
        with seeded(rng), default_dtype(next(self.model_.parameters()).dtype):
            z = self.model_.sample(int(n_samples)).double().cpu().numpy()
        return z * self.scale_ + self.mean_
