"""FD computation: shortrun's eigh form vs the reference sqrtm form (pytorch-fid's formula).

pytorch-fid's ``calculate_frechet_distance`` takes ``scipy.linalg.sqrtm(Σ₁Σ₂)``, checks the
imaginary part, and adds ``εI`` when the product is singular; shortrun takes the eigenvalues
of the symmetric ``Σ₁^{½}Σ₂Σ₁^{½}``. pytorch-fid itself cannot be installed here (it imports
torchvision), so the reference is that formula written out with scipy, as in its source.
Features are Gaussian with a random covariance (n = 10 000). Best of 3 repeats.

Usage: OPENBLAS_NUM_THREADS=1 python bench/frechet_speed.py  (both sides single-threaded)
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg
import torch

from shortrun.metrics.frechet import frechet_distance_from_stats, frechet_stats


def reference_fd(mu1, s1, mu2, s2, eps=1e-6) -> float:
    covmean = scipy.linalg.sqrtm(s1.dot(s2))
    if not np.isfinite(covmean).all():
        offset = np.eye(s1.shape[0]) * eps
        covmean = scipy.linalg.sqrtm((s1 + offset).dot(s2 + offset))
    covmean = covmean.real
    diff = mu1 - mu2
    return float(diff.dot(diff) + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


def best_of(fn, repeats=3) -> tuple[float, float]:
    times, value = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t)
    return min(times), value


def main() -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    print("| d | shortrun (s) | reference sqrtm (s) | ratio ref/ours | FD ours | FD ref |")
    print("|---|---|---|---|---|---|")
    for d in (128, 512, 2048):
        mix = rng.standard_normal((d, d)) / np.sqrt(d)
        a = frechet_stats(rng.standard_normal((10_000, d)) @ mix)
        b = frechet_stats(rng.standard_normal((10_000, d)) @ mix + 0.1)
        t_ours, v_ours = best_of(lambda a=a, b=b: frechet_distance_from_stats(a, b))
        t_ref, v_ref = best_of(lambda a=a, b=b: reference_fd(a.mu, a.sigma, b.mu, b.sigma))
        print(f"| {d} | {t_ours:.3f} | {t_ref:.3f} | {t_ref / t_ours:.2f} | {v_ours:.6f} | "
              f"{v_ref:.6f} |", flush=True)


if __name__ == "__main__":
    main()
