"""Annealed importance sampling of a Bernoulli RBM's log Z (Salakhutdinov & Murray 2008).

The path runs from a base-rate model A (no hidden couplings, visible biases fitted to the data
marginals, Eq. 14-15) to the RBM B through the intermediate unnormalised marginals

    log p*_k(v) = (1 − β_k) b_Aᵀv + β_k bᵀv + Σⱼ softplus(β_k (c + Wᵀv)ⱼ),

with ``log Z_A = Σᵢ softplus(b_A,ᵢ) + n_h log 2`` (the hidden units of A are uniform). Each run
starts at an exact sample of A and moves with the block-Gibbs transition that leaves p_k
invariant; its importance weight is ``Σ_k log p*_k(v_k) − log p*_{k−1}(v_k)`` (Eq. 12). The
estimate is ``log Z_A + log mean_r exp(w_r)``; its standard error is the delta-method
``sd(exp w) / (√R · mean(exp w))``, computed with the largest weight factored out.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from shortrun.energies.rbm import BernoulliRBMParams, bernoulli


class AISResult(NamedTuple):
    log_z: float
    stderr: float
    log_weights: torch.Tensor
    log_z_base: float


def base_rate_bias(data: torch.Tensor, pseudo_count: float = 1.0) -> torch.Tensor:
    """Visible biases of the base-rate model: the logit of the smoothed pixel means."""
    v = data.reshape(len(data), -1).double()
    p = (v.sum(0) + pseudo_count) / (len(v) + 2 * pseudo_count)
    return torch.log(p) - torch.log1p(-p)


def default_betas(n: int) -> torch.Tensor:
    """Salakhutdinov & Murray's schedule (500 / 4,000 / 10,000 steps on [0, .5] / [.5, .9] /
    [.9, 1]) rescaled to ``n`` inverse temperatures from 0 to 1."""
    if n < 10:
        raise ValueError(f"AIS needs at least 10 inverse temperatures; got {n}")
    n1 = max(2, round(n * 500 / 14500))
    n2 = max(2, round(n * 4000 / 14500))
    n3 = n - n1 - n2
    return torch.cat([torch.linspace(0.0, 0.5, n1 + 1)[:-1], torch.linspace(0.5, 0.9, n2 + 1)[:-1],
                      torch.linspace(0.9, 1.0, n3)]).double()


@torch.no_grad()
def ais_log_partition(params: BernoulliRBMParams, base_bias: torch.Tensor, n_runs: int = 100,
                      betas: torch.Tensor | int = 14500,
                      generator: torch.Generator | None = None,
                      dtype: torch.dtype = torch.float64) -> AISResult:
    """AIS estimate of ``log Z`` of ``params`` with ``n_runs`` independent runs."""
    if not isinstance(params, BernoulliRBMParams):
        raise TypeError("AIS is implemented for the Bernoulli RBM only")
    if n_runs < 2:
        raise ValueError(f"AIS needs at least 2 runs for a standard error; got {n_runs}")
    betas = default_betas(betas) if isinstance(betas, int) else betas.double()
    if betas[0] != 0.0 or betas[-1] != 1.0:
        raise ValueError("AIS inverse temperatures must run from 0 to 1")
    W, b, c = (t.detach().to(dtype) for t in (params.W, params.b, params.c))
    b_a = base_bias.to(dtype).reshape(-1)
    n_h = W.shape[1]
    log_z_a = float(F.softplus(b_a).sum()) + n_h * math.log(2.0)

    v = bernoulli(torch.sigmoid(b_a).expand(n_runs, -1).contiguous(), generator)
    log_w = torch.zeros(n_runs, dtype=torch.float64)   # accumulated in float64 at any dtype
    lin_a, lin_b = v @ b_a, v @ b
    hid = torch.addmm(c, v, W)
    prev = float(betas[0])
    for k in range(1, len(betas)):
        beta = float(betas[k])
        # log p*_k(v) − log p*_{k−1}(v) at the current state (Eq. 12)
        step = (beta - prev) * (lin_b - lin_a)
        step += F.softplus(beta * hid).sum(-1) - F.softplus(prev * hid).sum(-1)
        log_w += step
        prev = beta
        if k == len(betas) - 1:
            break
        h = bernoulli(torch.sigmoid(beta * hid), generator)
        v_in = torch.addmm(b_a, h, W.t(), beta=1.0 - beta, alpha=beta) + beta * b
        v = bernoulli(torch.sigmoid(v_in), generator)
        lin_a, lin_b = v @ b_a, v @ b
        hid = torch.addmm(c, v, W)
    top = float(log_w.max())
    r = torch.exp(log_w - top)
    mean = float(r.mean())
    stderr = float(r.std()) / (math.sqrt(n_runs) * mean)
    return AISResult(log_z_a + top + math.log(mean), stderr, log_w, log_z_a)
