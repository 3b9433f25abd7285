"""Did the chains mix? Rank-normalised effective sample size and split-R̂ of several chains.

The forms are those of Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), "Rank-normalization,
folding, and localization: an improved R̂ for assessing convergence of MCMC", Bayesian Analysis
16(2), computed on a scalar trace of shape ``(chains, draws)`` (here: the energy of each chain's
state after each step):

- every chain is split into its first and second half (§4.1), so a trend inside a chain shows up
  as disagreement between halves;
- draws are replaced by their normal scores ``Φ⁻¹((r − 3/8) / (S + 1/4))`` of their pooled ranks
  ``r`` (Blom 1958; §4.2, Eq. 14), so heavy tails and infinities do not break the estimates;
- ``split_rhat`` is the larger of the rank-normalised split-R̂ and the same on the folded draws
  ``|θ − median θ|`` (§4.2), each ``√(var⁺ / W)`` (Eq. 3-4);
- ``ess_bulk`` is the ESS (Eq. 11, Geyer's initial monotone sequence, §3.2 and Appendix A) of the
  rank-normalised split chains; ``ess_tail`` the smaller ESS of the indicators ``θ ≤ q₅%`` and
  ``θ ≤ q₉₅%`` (§4.3).

Pure NumPy (torch only for ``Φ⁻¹``); ``tests/metrics/test_chains.py`` checks every number against
ArviZ (arviz-stats) to 1e-6. Acceptance rates of Metropolis–Hastings kernels are averaged here too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from shortrun.errors import ConfigError

MIN_CHAINS = 2
MIN_DRAWS = 4
RHAT_OK = 1.05  # Vehtari et al. (2021, §4.3) ask for R̂ < 1.01; 1.05 flags a clear failure
TAIL_PROB = 0.05


def check_trace(trace: Any, what: str = "trace") -> np.ndarray:
    """``trace`` as a float64 ``(chains, draws)`` array, or a ConfigError naming the problem
    (one chain, too few draws, a non-finite value) and what to do about it."""
    arr = np.asarray(trace.detach().cpu() if isinstance(trace, torch.Tensor) else trace,
                     dtype=np.float64)
    if arr.ndim != 2:
        raise ConfigError(f"{what}: needs an array of shape (chains, draws); got shape "
                          f"{arr.shape}: stack one row of draws per chain")
    chains, draws = arr.shape
    if chains < MIN_CHAINS:
        raise ConfigError(f"{what}: R̂ compares chains and needs at least {MIN_CHAINS}; got "
                          f"{chains}: run several chains from different starts (--chains 4)")
    if draws < MIN_DRAWS:
        raise ConfigError(f"{what}: needs at least {MIN_DRAWS} draws per chain (each split half "
                          f"needs 2); got {draws}: run the chains longer (--steps)")
    bad = ~np.isfinite(arr)
    if bad.any():
        c, d = np.argwhere(bad)[0]
        raise ConfigError(f"{what}: {int(bad.sum())} non-finite value(s), first {arr[c, d]} at "
                          f"chain {c}, draw {d}: the chain diverged; lower the step size or "
                          "check the energy for overflow")
    return arr


def split_chains(arr: np.ndarray) -> np.ndarray:
    """First and second half of every chain as separate chains (the middle draw of an odd
    length is dropped): ``(M, N) → (2M, N // 2)``."""
    half = arr.shape[1] // 2
    return np.concatenate([arr[:, :half], arr[:, arr.shape[1] - half:]])


def average_ranks(arr: np.ndarray) -> np.ndarray:
    """Ranks 1..S of the pooled draws, ties given the mean of the ranks they share."""
    _, group, counts = np.unique(arr.ravel(), return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # rank of each group's last member
    return (last - (counts - 1) / 2.0)[group].reshape(arr.shape)


def normal_scores(arr: np.ndarray) -> np.ndarray:
    """Rank normalisation (Eq. 14): ``Φ⁻¹((r − 3/8) / (S + 1/4))`` of the pooled ranks."""
    p = (average_ranks(arr) - 0.375) / (arr.size + 0.25)
    return torch.special.ndtri(torch.from_numpy(p)).numpy()


def autocovariance(arr: np.ndarray) -> np.ndarray:
    """Biased (divide by N) autocovariance of every row at lags 0..N−1, by FFT."""
    n = arr.shape[1]
    centred = arr - arr.mean(axis=1, keepdims=True)
    size = 1 << (2 * n - 1).bit_length()  # zero padding: no wrap-around of the lags
    f = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(f * np.conj(f), n=size, axis=1)[:, :n] / n


def rhat_basic(arr: np.ndarray) -> float:
    """``√(var⁺ / W)`` (Eq. 3-4): ``W`` the mean within-chain variance, ``var⁺`` ``W`` shrunk
    by ``(N − 1)/N`` plus the variance of the chain means ``B/N``."""
    n = arr.shape[1]
    within = arr.var(axis=1, ddof=1).mean()
    var_plus = within * (n - 1) / n + arr.mean(axis=1).var(ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.sqrt(var_plus / within))


def ess_of(arr: np.ndarray) -> float:
    """ESS of the chains ``arr`` (already split / normalised), Eq. 10-11 of Vehtari et al.

    The combined autocorrelation ``ρ̂_t = 1 − (W − mean_m acov_m(t)) / var⁺`` is summed in pairs
    ``P_k = ρ̂_{2k} + ρ̂_{2k+1}`` up to the first negative pair (Geyer's initial positive
    sequence), the pairs made non-increasing (initial monotone sequence: a running minimum), and
    ``τ̂ = −1 + 2 Σ P_k + ρ̂_{2K}`` with the first element of the truncated pair ``ρ̂_{2K}`` when
    positive (Stan's refinement, Appendix A); ``τ̂ ≥ 1/log₁₀(MN)`` caps ESS for antithetic
    chains. A constant trace carries no autocorrelation to estimate: ESS = MN."""
    m, n = arr.shape
    total = m * n
    if np.ptp(arr) < np.finfo(float).resolution:
        return float(total)
    acov = autocovariance(arr)
    within = acov[:, 0].mean() * n / (n - 1)
    var_plus = within * (n - 1) / n + (arr.mean(axis=1).var(ddof=1) if m > 1 else 0.0)
    rho = 1.0 - (within - acov.mean(axis=0)) / var_plus
    rho[0] = 1.0
    pairs = [rho[0] + rho[1]]
    kept = 1  # pairs that entered the positive sequence
    k = 1
    while 2 * k < n - 2 and pairs[-1] > 0:
        pairs.append(rho[2 * k] + rho[2 * k + 1])
        if pairs[-1] >= 0:
            kept = k + 1
        k += 1
    full = k - 1  # pairs summed whole; pair k − 1 (the last looked at) lends its first element
    last_even = rho[2 * (k - 1)]
    extra = last_even if (last_even > 0 or kept == k) else 0.0
    tau = -1.0 + 2.0 * np.minimum.accumulate(np.asarray(pairs[:full])).sum() + extra
    tau = max(tau, 1.0 / np.log10(total))
    return float(total / tau)


def ess_bulk(trace: Any) -> float:
    """Bulk ESS: ESS of the rank-normalised split chains (§4.3)."""
    arr = check_trace(trace)
    return ess_of(normal_scores(split_chains(arr)))


def ess_tail(trace: Any, prob: float = TAIL_PROB) -> float:
    """Tail ESS: the smaller ESS of the split-chain indicators of ``θ ≤ q_prob`` and
    ``θ ≤ q_{1−prob}``, quantiles of the pooled draws (§4.3)."""
    arr = check_trace(trace)
    halves = split_chains(arr)
    return min(ess_of((halves <= np.quantile(arr, q)).astype(float))
               for q in (prob, 1.0 - prob))


def split_rhat(trace: Any) -> float:
    """Rank-normalised split-R̂: the larger of the bulk (normal scores of the split chains) and
    tail (normal scores of the folded split chains ``|θ − median|``) forms (§4.2). Chains that
    each stand still at different values give ``inf``."""
    halves = split_chains(check_trace(trace))
    folded = np.abs(halves - np.median(halves))
    return max(rhat_basic(normal_scores(halves)), rhat_basic(normal_scores(folded)))


def acceptance_rate(accepted: Any) -> float:
    """Fraction of accepted Metropolis–Hastings proposals over every chain and step of a
    ``(chains, steps)`` boolean record."""
    arr = np.asarray(accepted.cpu() if isinstance(accepted, torch.Tensor) else accepted)
    if arr.size == 0:
        raise ConfigError("acceptance_rate: the record of accepted proposals is empty: run at "
                          "least one step of a Metropolis–Hastings kernel")
    return float(arr.astype(np.float64).sum() / arr.size)


def summarize(trace: Any, what: str = "trace") -> dict[str, float]:
    """``ess_bulk``, ``ess_tail`` and ``rhat`` of one ``(chains, draws)`` trace, with its
    shape; the trace is checked once (messages name ``what``)."""
    arr = check_trace(trace, what)
    return {"ess_bulk": ess_bulk(arr), "ess_tail": ess_tail(arr), "rhat": split_rhat(arr),
            "chains": arr.shape[0], "draws": arr.shape[1]}
