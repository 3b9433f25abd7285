"""Grid normalisation of a 2-D energy: log Z, KL(data‖model), log-likelihood and pictures.

On a fine grid over a box holding the data, ``log Z ≈ logsumexp(−E(x_ij)) + log(cell area)``.
KL(data‖model) is computed cell by cell with both densities normalised on the same grid, so
mass outside the box is ignored by both — the usual protocol for toy 2-D EBMs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import torch

from shortrun.data.base import LoadedData
from shortrun.errors import ConfigError
from shortrun.plotting import pyplot

EnergyFn = Callable[[torch.Tensor], torch.Tensor]


def make_grid(half_width: float, n: int = 400) -> tuple[torch.Tensor, float]:
    """Cell centres of an ``n × n`` grid on ``[−w, w]²`` and the cell area."""
    edges = torch.linspace(-half_width, half_width, n + 1)
    centres = (edges[1:] + edges[:-1]) / 2
    xy = torch.cartesian_prod(centres, centres)
    return xy, float((2 * half_width / n) ** 2)


@torch.no_grad()
def grid_log_density(energy: EnergyFn, xy: torch.Tensor, area: float,
                     batch: int = 40_000) -> torch.Tensor:
    """Grid-normalised log density ``−E(x) − log Z`` at the grid points."""
    neg_e = torch.cat([-energy(xy[i : i + batch]).double() for i in range(0, len(xy), batch)])
    return neg_e - (torch.logsumexp(neg_e, 0) + math.log(area))


def plot_half_width(data: LoadedData) -> float:
    return float(data.extras.get("plot_range", float(data.train.abs().max()) * 1.15))


def kl_data_model(density, energy: EnergyFn, half: float, n: int = 400) -> float:
    """Grid KL(data‖model) in nats, both densities normalised on the same ``n × n`` grid."""
    xy, area = make_grid(half, n)
    log_q = grid_log_density(energy, xy, area)
    log_p = density.log_prob(xy.double())
    log_p = log_p - (torch.logsumexp(log_p, 0) + math.log(area))
    p_cell = (log_p + math.log(area)).exp()
    return float((p_cell * (log_p - log_q)).sum())


def grid_metrics(energy: EnergyFn, data: LoadedData, metrics: list[str], n: int = 400) -> dict:
    """``kl_grid`` (needs a closed-form data density) and ``loglik_grid`` (test points)."""
    if data.info.shape != (2,):
        raise ConfigError("kl_grid/loglik_grid need 2-D data; this dataset has shape "
                          f"{data.info.shape}")
    half = plot_half_width(data)
    out: dict[str, float] = {}
    if "kl_grid" in metrics:
        density = data.extras.get("density")
        if density is None:
            raise ConfigError("kl_grid needs a closed-form data density (the Gaussian "
                              "mixtures); this data set has none: use --metrics mmd")
        out["kl_grid"] = kl_data_model(density, energy, half, n)
    if "loglik_grid" in metrics:
        xy, area = make_grid(half, n)
        log_q = grid_log_density(energy, xy, area)
        test = data.test if data.test is not None else data.train
        test = test[(test.abs() < half).all(1)]
        idx = ((test + half) / (2 * half) * n).long().clamp(0, n - 1)
        flat = idx[:, 0] * n + idx[:, 1]
        out["loglik_grid"] = float(log_q[flat].mean())
    out["grid_cells"] = n * n
    return out


def save_density_and_samples(energy: EnergyFn, samples: torch.Tensor, data: torch.Tensor,
                             half: float, path: Path, title: str = "", n: int = 200) -> None:
    """Left: grid-normalised model density ``exp(−E)/Z``; right: samples over the data."""
    plt = pyplot()
    xy, area = make_grid(half, n)
    dens = grid_log_density(energy, xy, area).exp().reshape(n, n).T.numpy()
    fig, axes = plt.subplots(1, 2, figsize=(8, 4), dpi=100)
    axes[0].imshow(dens, origin="lower", extent=(-half, half, -half, half), cmap="viridis")
    axes[0].set_title("model density exp(-E)/Z")
    d, s = data[:5000].numpy(), samples.detach().cpu().numpy()
    axes[1].scatter(d[:, 0], d[:, 1], s=1, c="0.7", alpha=0.5, label="data")
    axes[1].scatter(s[:, 0], s[:, 1], s=1, c="tab:orange", alpha=0.6, label="samples")
    axes[1].set_title(f"{len(s)} samples over data")
    axes[1].legend(loc="upper right", markerscale=6, fontsize=7)
    for ax in axes:
        ax.set_xlim(-half, half)
        ax.set_ylim(-half, half)
        ax.set_aspect("equal")
    if title:
        fig.suptitle(title, fontsize=9)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
