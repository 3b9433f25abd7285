"""The pictures of ``bench/gallery.py``: one function per figure, each from trained runs through
the public model methods (``sample``, ``reconstruct``, ``sample_prior``, ``sample_posterior``,
``revise_x``, ``anomaly_score``). Every figure draws with fixed seeds, so a rerun on the same
runs gives the same picture. Each returns the numbers it shows (they go to
``gallery_numbers.json``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from shortrun.metrics.anomaly import auprc, auprc_trapezoid, pr_curve
from shortrun.plotting import pyplot, to_uint8_grid


@dataclass(frozen=True)
class Sizes:
    """How much each picture draws; ``tiny`` is the test's, small enough for seconds."""

    samples: int = 64          # prior / generator samples per panel
    recon: int = 10            # test images shown reconstructed
    mse_images: int = 500      # test images behind the MSE in the captions
    chain_steps: int = 2500    # long-run prior chain (the paper's §5.5 runs 2500 steps)
    chain_n: int = 100         # chains behind the energy trace
    chain_show: int = 8        # of them, drawn
    interp_pairs: int = 6
    interp_points: int = 10
    anomaly_max: int | None = None  # test images scored (None: the whole test split)
    sentences: int = 10


TINY = Sizes(samples=16, recon=4, mse_images=20, chain_steps=30, chain_n=8, chain_show=3,
             interp_pairs=2, interp_points=4, anomaly_max=300, sentences=3)


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def grid(x: torch.Tensor, info: Any, nrow: int | None = None) -> np.ndarray:
    return to_uint8_grid(x.detach().cpu(), info, nrow=nrow)


def save(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight", pad_inches=0.05)
    pyplot().close(fig)


def panels(path: Path, items: list[tuple[str, np.ndarray]], title: str = "",
           zoom: float = 1.6) -> None:
    """Image mosaics side by side at (about) ``zoom`` screen pixels per image pixel."""
    plt = pyplot()
    h = max(a.shape[0] for _, a in items)
    w = sum(a.shape[1] for _, a in items)
    fig, axes = plt.subplots(1, len(items), figsize=(zoom * w / 100 + 0.3 * len(items),
                                                     zoom * h / 100 + 0.6),
                             gridspec_kw={"width_ratios": [a.shape[1] for _, a in items]})
    for ax, (label, arr) in zip(np.atleast_1d(axes), items, strict=True):
        ax.imshow(arr, cmap="gray", interpolation="nearest")
        ax.set_title(label, fontsize=9)
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    save(fig, path)


def rows(path: Path, items: list[tuple[str, torch.Tensor]], info: Any, title: str = "",
         zoom: float = 1.6) -> None:
    """One labelled row of images per item (e.g. originals / reconstructions)."""
    plt = pyplot()
    arrs = [(label, grid(x, info, nrow=x.shape[0])) for label, x in items]
    h = sum(a.shape[0] for _, a in arrs)
    w = max(a.shape[1] for _, a in arrs)
    fig, axes = plt.subplots(len(arrs), 1, figsize=(zoom * w / 100 + 1.6, zoom * h / 100 + 0.8))
    for ax, (label, arr) in zip(np.atleast_1d(axes), arrs, strict=True):
        ax.imshow(arr, cmap="gray", interpolation="nearest")
        ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        for side in ax.spines.values():
            side.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=10)
    save(fig, path)


def recon_mse(model: Any, x: torch.Tensor, **kw: Any) -> float:
    """Per-pixel MSE of ``model.reconstruct`` on ``x`` (model scale), in batches of 250."""
    total = sum(float((xb - model.reconstruct(xb, generator=seeded(1), **kw)).pow(2).sum())
                for xb in x.split(250))
    return total / x.numel()


# --- LEBM ------------------------------------------------------------------------------------
def lebm_prior_samples(ebm: Any, gauss: Any, path: Path, label: str, s: Sizes) -> dict:
    """EBM prior vs Gaussian prior, same generator budget, same seed."""
    info = ebm.info
    x_e, x_g = ebm.sample(s.samples, generator=seeded(0)), gauss.sample(s.samples,
                                                                        generator=seeded(0))
    panels(path, [("EBM prior (short-run chain)", grid(x_e, info)),
                  ("Gaussian prior N(0, I)", grid(x_g, info))],
           f"{label}: LEBM prior samples, same generator and training budget")
    return {}


def lebm_reconstructions(ebm: Any, gauss: Any, x_test: torch.Tensor, path: Path, label: str,
                         s: Sizes) -> dict:
    """Test originals, then ``g(z)`` at a short-run posterior sample for each model."""
    x = x_test[: s.recon]
    pool = x_test[: s.mse_images]
    mse = {"ebm": recon_mse(ebm, pool), "gaussian": recon_mse(gauss, pool)}
    rows(path, [("test images", x),
                (f"EBM prior\nMSE {mse['ebm']:.4f}", ebm.reconstruct(x, generator=seeded(1))),
                (f"Gaussian prior\nMSE {mse['gaussian']:.4f}",
                 gauss.reconstruct(x, generator=seeded(1)))],
         ebm.info, f"{label}: reconstructions from a {ebm.options.post_steps}-step posterior "
                   f"chain (MSE per pixel on [-1, 1], {len(pool)} test images)")
    return {"recon_mse": mse, "recon_mse_images": len(pool)}


def lebm_long_chain(ebm: Any, path: Path, label: str, s: Sizes) -> dict:
    """The paper's §5.5 analysis: a prior chain run far past the K0 steps it was trained with;
    samples along it and the mean prior energy ``E_α(z)`` at every step."""
    plt = pyplot()
    k0, steps = ebm.options.prior_steps, s.chain_steps
    show = sorted({min(k, steps) for k in (k0, 4 * k0, steps // 5, steps // 2, steps)} - {0})
    energy, spread, snaps = [], [], {}

    def log(k: int, z: torch.Tensor, info: Any) -> None:
        energy.append(float(info.energy.mean()))
        spread.append(float(info.energy.std()))
        if k + 1 in show:  # z after k + 1 steps
            snaps[k + 1] = z[: s.chain_show].detach().clone()

    ebm.sample_prior(s.chain_n, steps, seeded(2), callback=log)
    with torch.no_grad():
        cols = [ebm.generator(snaps[k]) for k in show]
    mosaic = torch.cat(cols)  # row = step, column = chain
    fig, (ax_img, ax_e) = plt.subplots(1, 2, figsize=(10, 3.8),
                                       gridspec_kw={"width_ratios": [1.25, 1]})
    ax_img.imshow(grid(mosaic, ebm.info, nrow=s.chain_show), cmap="gray",
                  interpolation="nearest")
    ax_img.set_yticks([(i + 0.5) * (ebm.info.shape[-2] + 1) for i in range(len(show))])
    ax_img.set_yticklabels([str(k) for k in show], fontsize=8)
    ax_img.set_xticks([])
    ax_img.set_ylabel("after Langevin step")
    ax_img.set_title(f"{s.chain_show} prior chains, g(z) along each", fontsize=9)
    e, sd, k = np.array(energy), np.array(spread), np.arange(1, len(energy) + 1)
    ax_e.plot(k, e, lw=1)
    ax_e.fill_between(k, e - sd, e + sd, alpha=0.25, lw=0)
    ax_e.axvline(k0, color="k", ls=":", lw=1, label=f"K0 = {k0} (training)")
    ax_e.set_xscale("log")
    ax_e.set_xlabel("Langevin step")
    ax_e.set_ylabel("E_α(z) = −f_α(z) + ‖z‖²/2σ²")
    ax_e.set_title(f"mean ± std over {s.chain_n} chains", fontsize=9)
    ax_e.legend(fontsize=8)
    fig.suptitle(f"{label}: long-run prior chain ({steps} steps, step size "
                 f"{ebm.options.prior_step_size})", fontsize=10)
    fig.tight_layout()
    save(fig, path)
    at = {str(j): round(energy[j - 1], 3) for j in show}
    return {"chain_steps": steps, "chain_energy_at": at}


def lebm_interpolation(ebm: Any, x_test: torch.Tensor, path: Path, label: str,
                       s: Sizes) -> dict:
    """``g((1 − t) z_a + t z_b)``: z_a, z_b posterior samples of two test images."""
    n = s.interp_pairs
    x = x_test[: 2 * n]
    z = ebm.sample_posterior(x, generator=seeded(3)).detach()
    t = torch.linspace(0, 1, s.interp_points)
    path_z = (1 - t)[None, :, None] * z[:n, None] + t[None, :, None] * z[n:, None]
    with torch.no_grad():
        mid = ebm.generator(path_z.flatten(0, 1)).unflatten(0, (n, s.interp_points))
    mosaic = torch.cat([x[:n, None], mid, x[n:, None]], 1).flatten(0, 1)
    panels(path, [("", grid(mosaic, ebm.info, nrow=s.interp_points + 2))],
           f"{label}: linear path in z between the posterior codes of two test images\n"
           "(outer columns: the test images; inner: g(z) along the path)")
    return {}


# --- Dual-MCMC -------------------------------------------------------------------------------
def dual_revision(model: Any, path: Path, s: Sizes) -> dict:
    """Generator samples ``g(z)`` beside the same samples after the EBM's x-chain."""
    x_gen = model.sample_generator(s.samples, generator=seeded(0))
    x_rev = model.revise_x(x_gen, generator=seeded(4)).detach()
    change = float((x_rev - x_gen).abs().mean())
    panels(path, [("generator g(z), z ~ N(0, I)", grid(x_gen, model.info)),
                  (f"after the EBM's x-chain ({model.options.x_steps} steps)",
                   grid(x_rev, model.info))],
           f"Dual-MCMC, Fashion-MNIST: mean |change| per pixel {change:.4f} on [-1, 1]")
    return {"revision_mean_abs_change": change}


def dual_reconstructions(model: Any, x_test: torch.Tensor, path: Path, s: Sizes) -> dict:
    """``g(μ_φ(x))`` (inference network) vs ``g(z̃)`` after the z-chain from it."""
    x, pool = x_test[: s.recon], x_test[: s.mse_images]
    mse = {"inference": recon_mse(model, pool, chain=False), "chain": recon_mse(model, pool)}
    rows(path, [("test images", x),
                (f"inference net\nMSE {mse['inference']:.4f}", model.reconstruct(x, chain=False)),
                (f"+ z-chain\nMSE {mse['chain']:.4f}",
                 model.reconstruct(x, generator=seeded(1)))],
         model.info, f"Dual-MCMC, Fashion-MNIST: reconstructions (z-chain "
                     f"{model.options.z_steps} steps; MSE per pixel, {len(pool)} test images)")
    return {"recon_mse": mse, "recon_mse_images": len(pool)}


# --- anomaly ---------------------------------------------------------------------------------
def anomaly_scores(model: Any, x: torch.Tensor, score: str, steps: int | None) -> np.ndarray:
    """``model.anomaly_score`` with ``model.anomaly_score = score``; the same seed for every
    score, so all variants are read at the same posterior samples."""
    model.options = dataclasses.replace(model.options, anomaly_score=score)
    g = seeded(5)
    return torch.cat([model.anomaly_score(xb, steps, generator=g).double().cpu()
                      for xb in x.split(500)]).numpy()


def anomaly_figure(model: Any, x: torch.Tensor, labels: np.ndarray, digit: int,
                   scores: tuple[str, ...], steps: int | None, path: Path) -> dict:
    """Score histograms (normals vs the held-out digit) and the precision–recall curve."""
    plt = pyplot()
    prevalence = float(labels.mean())
    fig, axes = plt.subplots(1, len(scores) + 1, figsize=(4 * (len(scores) + 1), 3.3))
    out: dict[str, Any] = {"anomaly_digit": digit, "scored": len(labels),
                           "prevalence": prevalence}
    for ax, name in zip(axes[:-1], scores, strict=True):
        sc = anomaly_scores(model, x, name, steps)
        ap, trap = auprc(sc, labels), auprc_trapezoid(sc, labels)
        out[name] = {"auprc": ap, "auprc_trapezoid": trap}
        lo, hi = np.percentile(sc, [0.5, 99.5])
        bins = np.linspace(lo, hi, 60)
        ax.hist(sc[labels == 0], bins, density=True, alpha=0.6, label="normal digits")
        ax.hist(sc[labels == 1], bins, density=True, alpha=0.6, label=f"held-out {digit}")
        ax.set_title(f"score '{name}': AP {ap:.3f}", fontsize=9)
        ax.set_xlabel("anomaly score (higher = more anomalous)", fontsize=8)
        ax.legend(fontsize=7)
        recall, precision = pr_curve(sc, labels)
        axes[-1].plot(recall, precision, lw=1.2, label=f"{name} (AP {ap:.3f}, trapz {trap:.3f})")
    axes[-1].axhline(prevalence, color="k", ls=":", lw=1, label=f"random ({prevalence:.3f})")
    axes[-1].set_xlabel("recall")
    axes[-1].set_ylabel("precision")
    axes[-1].set_ylim(0, 1.02)
    axes[-1].set_title("precision-recall", fontsize=9)
    axes[-1].legend(fontsize=7)
    fig.suptitle(f"LEBM anomaly detection, MNIST, held-out digit {digit} "
                 f"({int(labels.sum())} anomalies, {int((labels == 0).sum())} normals scored)",
                 fontsize=10)
    fig.tight_layout()
    save(fig, path)
    return out


# --- text ------------------------------------------------------------------------------------
def sentence_table(columns: list[tuple[str, list[str]]]) -> str:
    """A markdown table, one sampled sentence per cell."""
    head = "| # | " + " | ".join(name for name, _ in columns) + " |"
    lines = [head, "|---|" + "---|" * len(columns)]
    for i in range(max(len(c) for _, c in columns)):
        cells = [(c[i] if i < len(c) else "").replace("|", "\\|") or "(empty)"
                 for _, c in columns]
        lines.append(f"| {i + 1} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
