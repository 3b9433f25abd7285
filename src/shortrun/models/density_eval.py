"""Pictures shared by the data-space EBM and the score-matching models on 2-D data: the density
heat map beside samples over the data. Their evaluation (``kl_grid``, ``loglik_grid``, ``mmd``,
``fd``/``kid``) is :mod:`shortrun.evaluation.density`.
"""

from __future__ import annotations

from pathlib import Path

import torch


class DensityEvalMixin:
    """Needs ``self.info``, ``self.sample`` and ``self.density_energy()``; the pictures draw over
    ``self.reference_data`` (the run's own data)."""

    def density_energy(self):  # the energy whose exp(−E)/Z is the model density
        raise NotImplementedError

    def draw_2d(self, energy, samples: torch.Tensor, path: Path) -> None:
        from shortrun.estimators.grid import plot_half_width, save_density_and_samples

        # the run's own data (the Trainer sets it); without it the samples stand in, so a
        # picture never shows some other dataset
        data = self.reference_data
        if data is None:
            from shortrun.data.base import LoadedData

            data = LoadedData(train=samples.detach().cpu(), info=self.info)
        save_density_and_samples(energy, samples, data.train, plot_half_width(data), path)
