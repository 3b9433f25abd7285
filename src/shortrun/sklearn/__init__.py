"""scikit-learn estimators over shortrun's models: ``BernoulliRBM`` (a drop-in for
``sklearn.neural_network.BernoulliRBM``), ``GaussianBernoulliRBM`` and ``EBMDensity`` (the
data-space EBM in ``KernelDensity``'s shape). NumPy in, NumPy out; they pass scikit-learn's
own estimator checks (tests/sklearn). This subpackage is the only place that imports
scikit-learn's estimator machinery."""

from __future__ import annotations

from shortrun.sklearn.density import EBMDensity
from shortrun.sklearn.rbm import BernoulliRBM, GaussianBernoulliRBM

__all__ = ["BernoulliRBM", "EBMDensity", "GaussianBernoulliRBM"]
