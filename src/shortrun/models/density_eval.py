"""Pictures shared by the data-space EBM and the score-matching models on 2-D data: the density
heat map beside samples over the data. Their evaluation (``kl_grid``, ``loglik_grid``, ``mmd``,
``fd``/``kid``) is :mod:`shortrun.evaluation.density`.
"""

from __future__ import annotations

from pathlib import Path

import torch


class DensityEvalMixin:
    """Needs ``self.cfg``, ``self.info``, ``self.sample`` and ``self.density_energy()``."""

    def density_energy(self):  # the energy whose exp(−E)/Z is the model density
        raise NotImplementedError

    def draw_2d(self, energy, samples: torch.Tensor, path: Path) -> None:
        from shortrun.estimators.grid import plot_half_width, save_density_and_samples

        data = getattr(self, "_plot_data", None)
        if data is None:
            from shortrun.data.registry import load_data

            data = load_data(self.cfg.data)
            self._plot_data = data
        save_density_and_samples(energy, samples, data.train, plot_half_width(data), path)
