"""Models: each paper's method composed from energies, kernels, chain sources and objectives."""

from shortrun.models.base import Model
from shortrun.models.registry import build_model, model_class

__all__ = ["Model", "build_model", "model_class"]
