"""Evaluation and pictures shared by the data-space EBM and the score-matching models.

2-D data: ``kl_grid`` (grid-normalised KL(data‖model), Gaussian mixtures only),
``loglik_grid`` and a sample ``mmd`` against the test split, plus a picture of the density
heat map beside samples over the data (written to ``RUN_DIR/density.png`` by ``eval``).
Images: ``fd`` / ``kid`` through :mod:`shortrun.metrics.features`.
"""

from __future__ import annotations

from pathlib import Path

import torch

from shortrun.data.base import LoadedData
from shortrun.errors import ConfigError

VECTOR_METRICS = ("kl_grid", "loglik_grid", "mmd")
IMAGE_METRICS = ("fd", "kid")


class DensityEvalMixin:
    """Needs ``self.info``, ``self.sample`` and ``self.density_energy()``; evaluation reads the
    run's config ``cfg`` (``eval.*``, ``data.name``) passed in."""

    metrics = VECTOR_METRICS + IMAGE_METRICS
    default_metrics = ("kl_grid", "loglik_grid", "mmd")

    def density_energy(self):  # the energy whose exp(−E)/Z is the model density
        raise NotImplementedError

    def check_metrics(self, metrics: list[str], cfg=None) -> list[str]:
        if not metrics:
            if self.info.shape != (2,):
                return ["fd"]
            from shortrun.data.toy2d import toy_density

            name = getattr(getattr(cfg, "data", None), "name", "")
            has_density = toy_density(name) is not None
            return [m for m in VECTOR_METRICS if has_density or m != "kl_grid"]
        chosen = super().check_metrics(metrics, cfg)
        wrong = [m for m in chosen if (m in VECTOR_METRICS) != (self.info.shape == (2,))]
        if wrong:
            kind, ok = (("2-D", VECTOR_METRICS) if self.info.shape == (2,)
                        else ("image", IMAGE_METRICS))
            raise ConfigError(f"--metrics: {', '.join(wrong)} not available for {kind} data; "
                              f"use {', '.join(ok)}")
        return chosen

    @torch.no_grad()
    def sample_many(self, n: int, batch_size: int) -> torch.Tensor:
        return torch.cat([self.sample(min(batch_size, n - i)).detach().cpu()
                          for i in range(0, n, batch_size)])

    def evaluate(self, metrics, data: LoadedData, run_dir, cfg):
        if self.info.shape != (2,):
            from shortrun.metrics.features import model_fd_kid

            return model_fd_kid(self, data, cfg, tuple(metrics))
        from shortrun.estimators.grid import grid_metrics, plot_half_width
        from shortrun.metrics.mmd import mmd2

        out: dict[str, float] = {}
        grid = [m for m in metrics if m in ("kl_grid", "loglik_grid")]
        if grid:
            out.update(grid_metrics(self.density_energy(), data, grid))
        samples = self.sample_many(cfg.eval.n_samples, cfg.eval.batch_size)
        if "mmd" in metrics:
            ref = data.test if data.test is not None else data.train
            out["mmd"] = mmd2(samples, ref[: cfg.eval.n_samples])
            out["mmd_n"] = len(samples)
        if run_dir is not None:
            from shortrun.estimators.grid import save_density_and_samples

            save_density_and_samples(self.density_energy(), samples, data.train,
                                     plot_half_width(data), Path(run_dir) / "density.png",
                                     title=self._title(out, cfg))
        return out

    def _title(self, out: dict, cfg) -> str:
        parts = [f"{k}={out[k]:.3g}" for k in ("kl_grid", "mmd") if k in out]
        return f"{cfg.recipe or cfg.model.name}  " + "  ".join(parts)

    def draw_2d(self, energy, samples: torch.Tensor, path: Path) -> None:
        from shortrun.estimators.grid import plot_half_width, save_density_and_samples

        # the run's own data (the Trainer sets it); without it the samples stand in, so a
        # picture never shows some other dataset
        data = self.reference_data
        if data is None:
            from shortrun.data.base import LoadedData

            data = LoadedData(train=samples.detach().cpu(), info=self.info)
        save_density_and_samples(energy, samples, data.train, plot_half_width(data), path)
