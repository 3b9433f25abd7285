"""Grid normalisation of a 2-D energy: log Z, KL(data‖model) and log-likelihood.

On a fine grid over a box holding the data, ``log Z ≈ logsumexp(−E(x_ij)) + log(cell area)``.
KL(data‖model) is computed cell by cell with both densities normalised on the same grid, so
mass outside the box is ignored by both — the usual protocol for toy 2-D EBMs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from shortrun.data.base import LoadedData
from shortrun.errors import ConfigError


def make_grid(half_width: float, n: int = 400) -> tuple[torch.Tensor, float]:
    """Cell centres of an ``n × n`` grid on ``[−w, w]²`` and the cell area."""
    edges = torch.linspace(-half_width, half_width, n + 1)
    centres = (edges[1:] + edges[:-1]) / 2
    xy = torch.cartesian_prod(centres, centres)
    return xy, float((2 * half_width / n) ** 2)


@torch.no_grad()
def grid_log_density(energy: Callable[[torch.Tensor], torch.Tensor], xy: torch.Tensor,
                     area: float, batch: int = 40_000) -> torch.Tensor:
    """Grid-normalised log density ``−E(x) − log Z`` at the grid points."""
    neg_e = torch.cat([-energy(xy[i : i + batch]).double() for i in range(0, len(xy), batch)])
    return neg_e - (torch.logsumexp(neg_e, 0) + math.log(area))


def grid_metrics(energy, data: LoadedData, metrics: list[str], n: int = 400) -> dict:
    if data.info.shape != (2,):
        raise ConfigError("kl_grid/loglik_grid need 2-D data; this dataset has shape "
                          f"{data.info.shape}")
    half = float(data.extras.get("plot_range", float(data.train.abs().max()) * 1.15))
    xy, area = make_grid(half, n)
    log_q = grid_log_density(energy, xy, area)
    out: dict[str, float] = {}
    if "kl_grid" in metrics:
        density = data.extras.get("density")
        if density is None:
            raise ConfigError(f"kl_grid needs a closed-form data density; dataset "
                              f"{data.info!r} has none (use mmd)")
        log_p = density.log_prob(xy.double())
        log_p = log_p - (torch.logsumexp(log_p, 0) + math.log(area))
        p_cell = (log_p + math.log(area)).exp()
        out["kl_grid"] = float((p_cell * (log_p - log_q)).sum())
    if "loglik_grid" in metrics:
        test = data.test if data.test is not None else data.train
        test = test[(test.abs() < half).all(1)]
        idx = ((test + half) / (2 * half) * n).long().clamp(0, n - 1)
        flat = idx[:, 0] * n + idx[:, 1]
        out["loglik_grid"] = float(log_q[flat].mean())
    out["grid_cells"] = n * n
    return out
