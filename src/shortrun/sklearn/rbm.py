"""scikit-learn estimators for shortrun's RBMs: ``BernoulliRBM`` (a drop-in for
``sklearn.neural_network.BernoulliRBM``) and ``GaussianBernoulliRBM`` for real-valued data.

Semantics of :class:`BernoulliRBM`, matching scikit-learn's: rows of ``X`` are visible
*probabilities* (any value in [0, 1]; binary data is the special case). The positive phase
uses them as they are, ``⟨v p(h|v)ᵀ⟩`` at the data (Hinton 2002, Eq. 5; scikit-learn's
``_fit``); the default ``learning="pcd"`` keeps ``batch_size`` persistent chains (Tieleman
2008), as scikit-learn does, which start at data rows (probabilities) and are Bernoulli samples
from their first sweep on (scikit-learn starts its chains at all-zero hidden samples). Batches
are taken in order without shuffling, the learning rate is per example (``lr · mean`` =
scikit-learn's ``lr / batch_size · sum``), the weights start at N(0, 0.01²), the biases at zero.
Values outside [0, 1] are taken as scikit-learn takes them (no check), with the data-dependent
start (PCD's chains) clipped to [0, 1].

The update is the library's (``shortrun.models.rbm.BernoulliRBM.training_step``, its NumPy or
torch route), run by a lean loop; the fitted ``components_``, ``intercept_hidden_`` and
``intercept_visible_`` are NumPy copies in the standard parametrisation (centring folded in),
and ``transform``, ``gibbs`` and the pseudo-likelihood are computed from them in NumPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from shortrun.data.base import DataInfo, LoadedData
from shortrun.estimators.ais import ais_log_partition, base_rate_bias
from shortrun.estimators.exact import log_partition
from shortrun.models.base import OptimOptions
from shortrun.models.grbm import GaussianBernoulliRBM as GaussianModel
from shortrun.models.rbm import BernoulliRBM as BernoulliModel
from shortrun.sklearn._common import (
    even_slices,
    seeded,
    torch_device,
    torch_dtype,
    train_steps,
)

METHODS = ("pseudo", "exact", "ais")


def expit(a: np.ndarray) -> np.ndarray:
    """The logistic sigmoid, overflow-free: ``exp(−softplus(−a))``."""
    return np.exp(-np.logaddexp(0, -a))


class _RBMEstimator(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """fit / partial_fit / transform / gibbs / score_samples over a shortrun RBM model."""

    Model: type = BernoulliModel

    # ------------------------------------------------------------------ training
    def fit(self, X: Any, y: Any = None) -> _RBMEstimator:
        """Fit the model to ``X`` (n_samples, n_features): ``n_iter`` passes in batches of
        ``batch_size``. Returns the estimator."""
        X = self._check(X, reset=True)
        self.random_state_ = check_random_state(self.random_state)
        self._start(X)
        rows = self._tensor(X)
        batches = [rows[s] for s in even_slices(len(X), self.batch_size)]
        for iteration in range(1, self.n_iter + 1):
            with seeded(self.random_state_):
                self.n_steps_ = train_steps(self.model_, self.optimizer_, batches,
                                            self.n_steps_)
            if self.verbose:
                self._publish()
                print(f"[{type(self).__name__}] Iteration {iteration}, "
                      f"{self._progress_line(X)}")
        self._publish()
        return self

    def partial_fit(self, X: Any, y: Any = None) -> _RBMEstimator:
        """One update on ``X`` as one batch (scikit-learn's ``partial_fit``); the first call
        starts the model."""
        first = not hasattr(self, "model_")
        X = self._check(X, reset=first)
        if first:
            self.random_state_ = check_random_state(self.random_state)
            self._start(X)
        with seeded(self.random_state_):
            self.n_steps_ = train_steps(self.model_, self.optimizer_, [self._tensor(X)],
                                        self.n_steps_)
        self._publish()
        return self

    def _start(self, X: np.ndarray) -> None:
        self.torch_dtype_ = torch_dtype(self.dtype, type(self).__name__)
        device = torch_device(self.device, type(self).__name__)
        info = self._info(X)
        with seeded(self.random_state_):
            model = self.Model(n_hidden=self.n_components, info=info, **self._model_options())
            model = model.to(device=device, dtype=self.torch_dtype_)
            self.optimizer_ = model.configure_training(OptimOptions(
                lr=self.learning_rate, weight_decay=self.weight_decay))["main"]
            start = self._tensor(self._start_rows(X))
            model.on_train_start(LoadedData(train=start, info=info))
        self.model_, self.n_steps_ = model, 0
        self._n_features_out = self.n_components

    def _tensor(self, X: np.ndarray) -> torch.Tensor:
        """``X`` as a tensor of the training dtype and device, sharing memory where it can
        (a read-only array, e.g. a memory map, is copied: torch tensors are writable)."""
        X = np.ascontiguousarray(X)
        if not X.flags.writeable:
            X = X.copy()
        return torch.from_numpy(X).to(torch_device(self.device, type(self).__name__),
                                      self.torch_dtype_)

    def _check(self, X: Any, reset: bool) -> np.ndarray:
        X = validate_data(self, X, accept_sparse=("csr", "csc", "coo"),
                          dtype=(np.float64, np.float32), reset=reset)
        return X.toarray() if hasattr(X, "toarray") else X

    # ------------------------------------------------------------------ use
    def transform(self, X: Any) -> np.ndarray:
        """Hidden probabilities ``p(h = 1 | v)``, (n_samples, n_components): the features."""
        check_is_fitted(self)
        X = self._check(X, reset=False)
        return expit(self._hidden_input(X))

    def score_samples(self, X: Any, method: str = "pseudo", *, ais_runs: int = 100,
                      ais_betas: int = 14500) -> np.ndarray:
        """Per-example log-likelihoods. ``method="pseudo"`` (default): scikit-learn's
        pseudo-likelihood; ``"exact"``: the true ``log p(v)`` with ``log Z`` by enumerating
        the smaller layer; ``"ais"``: with ``log Z`` by annealed importance sampling
        (Salakhutdinov & Murray 2008), ``X`` as the base-rate data."""
        check_is_fitted(self)
        if method not in METHODS:
            raise ValueError(f"{type(self).__name__}.score_samples: method must be one of "
                             f"{', '.join(METHODS)}; got {method!r}")
        X = self._check(X, reset=False)
        if method == "pseudo":
            return self._pseudo_likelihood(X)
        return self._log_likelihood(X, method, ais_runs, ais_betas)

    def _log_likelihood(self, X: np.ndarray, method: str, ais_runs: int,
                        ais_betas: int) -> np.ndarray:
        model = self.model_
        p = model.params()
        p64 = type(p)(*(t.double().cpu() for t in vars(p).values()))
        rows = torch.from_numpy(np.asarray(X, dtype=np.float64))
        if method == "exact":
            bits = model.enumerable_bits()
            if bits > model.options.exact_max_bits:
                raise ValueError(f"{type(self).__name__}.score_samples: method='exact' "
                                 f"enumerates 2^{bits} states, over the limit 2^"
                                 f"{model.options.exact_max_bits}; use method='ais'")
            log_z = float(log_partition(p64, torch.float64))
        else:
            log_z = self._ais_log_z(p64, rows, ais_runs, ais_betas)
        return (-p64.free_energy(rows) - log_z).numpy()

    def _ais_log_z(self, p64: Any, rows: torch.Tensor, runs: int, betas: int) -> float:
        g = torch.Generator().manual_seed(int(check_random_state(self.random_state)
                                              .randint(0, 2**31 - 1)))
        return float(ais_log_partition(p64, base_rate_bias(rows.clamp(0, 1)), runs, betas,
                                       g).log_z)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.non_deterministic = False
        return tags


class BernoulliRBM(_RBMEstimator):
    """Bernoulli RBM with the constructor, methods and fitted attributes of
    ``sklearn.neural_network.BernoulliRBM``, trained by shortrun's update.

    Beyond scikit-learn: ``learning`` ("pcd" as scikit-learn, "cd", "fpcd" (Tieleman & Hinton
    2009) or "pt": persistent chains moved by parallel tempering (Desjardins et al. 2010)),
    ``k`` Gibbs sweeps per update, ``n_chains`` (default ``batch_size``), ``centering``
    (Melchior et al. 2016), ``momentum``, ``weight_decay`` (on the weights), ``device`` and
    ``dtype`` of the training. ``score_samples(X, method="exact" | "ais")`` gives the true
    ``log p(v)``."""

    Model = BernoulliModel

    def __init__(self, n_components: int = 256, *, learning_rate: float = 0.1,
                 batch_size: int = 10, n_iter: int = 10, verbose: int = 0,
                 random_state: Any = None, learning: str = "pcd", k: int = 1,
                 n_chains: int | None = None, centering: bool = False, momentum: float = 0.0,
                 weight_decay: float = 0.0, device: str = "cpu", dtype: str = "float32"
                 ) -> None:
        self.n_components = n_components
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.verbose = verbose
        self.random_state = random_state
        self.learning = learning
        self.k = k
        self.n_chains = n_chains
        self.centering = centering
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.device = device
        self.dtype = dtype

    def _model_options(self) -> dict[str, Any]:
        pt = self.learning == "pt"
        return {"learning": "pcd" if pt else self.learning, "chain": "tempering" if pt
                else "gibbs", "k": self.k, "n_chains": self.n_chains or self.batch_size,
                "centering": bool(self.centering), "momentum": self.momentum,
                "visible_bias_init": "zero"}

    def _info(self, X: np.ndarray) -> DataInfo:
        # probabilities, binary data included: telling them apart would cost a pass over X
        return DataInfo((X.shape[1],), "vector")

    def _start_rows(self, X: np.ndarray) -> np.ndarray:
        return X if X.min() >= 0 and X.max() <= 1 else np.clip(X, 0.0, 1.0)

    def _publish(self) -> None:
        """The fitted attributes, standard form, as NumPy arrays."""
        p = self.model_.params()
        self.components_ = p.W.t().cpu().numpy().copy()
        self.intercept_hidden_ = p.c.cpu().numpy().copy()
        self.intercept_visible_ = p.b.cpu().numpy().copy()

    def _hidden_input(self, X: np.ndarray) -> np.ndarray:
        W = self.components_.astype(X.dtype, copy=False)
        return X @ W.T + self.intercept_hidden_.astype(X.dtype, copy=False)

    def _free_energy(self, v: np.ndarray) -> np.ndarray:
        """``F(v) = −bᵀv − Σⱼ softplus(c + Wᵀv)ⱼ``, shortrun's sign: p(v) ∝ exp(−F(v))."""
        return (-(v @ self.intercept_visible_.astype(v.dtype, copy=False))
                - np.logaddexp(0, self._hidden_input(v)).sum(axis=1))

    def _pseudo_likelihood(self, X: np.ndarray) -> np.ndarray:
        """scikit-learn's estimate: one random unit per row flipped,
        ``D · log σ(F(v̄) − F(v))`` = ``−D · softplus(F(v) − F(v̄))`` (Besag 1975), with the
        units drawn from ``random_state`` afresh on each call."""
        rng = check_random_state(self.random_state)
        rows = np.arange(X.shape[0])
        cols = rng.randint(0, X.shape[1], X.shape[0])
        flipped = X.copy()
        flipped[rows, cols] = 1 - flipped[rows, cols]
        return -X.shape[1] * np.logaddexp(0, self._free_energy(X) - self._free_energy(flipped))

    def gibbs(self, v: Any) -> np.ndarray:
        """One Gibbs sweep from ``v``: ``h ~ p(h|v)``, then ``v' ~ p(v|h)`` (Bernoulli
        samples, drawn from ``random_state_``)."""
        check_is_fitted(self)
        v = self._check(v, reset=False)
        rng = self.random_state_
        h = (rng.uniform(size=(v.shape[0], self.n_components)) < expit(self._hidden_input(v)))
        a = h.astype(v.dtype) @ self.components_.astype(v.dtype, copy=False)
        a += self.intercept_visible_.astype(v.dtype, copy=False)
        return (rng.uniform(size=a.shape) < expit(a)).astype(v.dtype)

    def _progress_line(self, X: np.ndarray) -> str:
        return f"pseudo-likelihood = {self._pseudo_likelihood(X).mean():.2f}"


class GaussianBernoulliRBM(_RBMEstimator):
    """Gaussian-Bernoulli RBM (Cho, Ilin & Raiko 2011) for real-valued data, with the shape of
    :class:`BernoulliRBM`: ``components_`` (W as scikit-learn lays it out),
    ``intercept_hidden_``, ``intercept_visible_`` (the visible means ``b``) and ``sigma_`` (the
    visible standard deviations, learned unless ``learn_sigma=False``). ``score_samples(X)`` is
    the exact ``log p(v)``, enumerating the hidden layer (``n_components`` up to 24; the
    default 16 keeps it cheap); ``gibbs`` draws ``v' ~ N(b + Wh, σ²)``."""

    Model = GaussianModel

    def __init__(self, n_components: int = 16, *, learning_rate: float = 0.01,
                 batch_size: int = 10, n_iter: int = 10, verbose: int = 0,
                 random_state: Any = None, learning: str = "pcd", k: int = 1,
                 n_chains: int | None = None, learn_sigma: bool = True, momentum: float = 0.0,
                 weight_decay: float = 0.0, device: str = "cpu", dtype: str = "float32"
                 ) -> None:
        self.n_components = n_components
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.verbose = verbose
        self.random_state = random_state
        self.learning = learning
        self.k = k
        self.n_chains = n_chains
        self.learn_sigma = learn_sigma
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.device = device
        self.dtype = dtype

    def _model_options(self) -> dict[str, Any]:
        pt = self.learning == "pt"
        return {"learning": "pcd" if pt else self.learning, "chain": "tempering" if pt
                else "gibbs", "k": self.k, "n_chains": self.n_chains or self.batch_size,
                "learn_sigma": bool(self.learn_sigma), "momentum": self.momentum}

    def _info(self, X: np.ndarray) -> DataInfo:
        return DataInfo((X.shape[1],), "vector")

    def _start_rows(self, X: np.ndarray) -> np.ndarray:
        return X

    def _publish(self) -> None:
        p = self.model_.params()
        self.components_ = p.W.t().cpu().numpy().copy()
        self.intercept_hidden_ = p.c.cpu().numpy().copy()
        self.intercept_visible_ = p.b.cpu().numpy().copy()
        self.sigma_ = np.exp(0.5 * p.log_var.cpu().numpy())

    def _hidden_input(self, X: np.ndarray) -> np.ndarray:
        prec = (1.0 / self.sigma_**2).astype(X.dtype)
        return (X * prec) @ self.components_.T.astype(X.dtype) + \
            self.intercept_hidden_.astype(X.dtype)

    def score_samples(self, X: Any, method: str = "exact", **options: Any) -> np.ndarray:
        """The exact ``log p(v)`` per example (``method="exact"``, the only one here: AIS is
        implemented for the binary RBM)."""
        if method != "exact":
            raise ValueError(f"GaussianBernoulliRBM.score_samples: method must be 'exact' "
                             f"(AIS is implemented for the binary RBM only); got {method!r}")
        return super().score_samples(X, method, **options)

    def gibbs(self, v: Any) -> np.ndarray:
        check_is_fitted(self)
        v = self._check(v, reset=False)
        rng = self.random_state_
        h = (rng.uniform(size=(v.shape[0], self.n_components)) < expit(self._hidden_input(v)))
        mean = h @ self.components_ + self.intercept_visible_
        return (mean + self.sigma_ * rng.standard_normal(mean.shape)).astype(v.dtype)

    def _progress_line(self, X: np.ndarray) -> str:
        return f"reconstruction error = {np.mean((self.gibbs(X) - X) ** 2):.4f}"
