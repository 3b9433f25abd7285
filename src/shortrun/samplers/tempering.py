"""Parallel tempering (replica exchange) for RBMs over a ladder of inverse temperatures.

Replica ``t`` targets ``p_βt(v) ∝ Σ_h exp(−β_t E(v, h)) = exp(−F_βt(v))`` (see
:mod:`shortrun.samplers.gibbs`); β_0 = 1 is the model, lower β are flatter and mix fast.
Each sweep moves every replica by one block-Gibbs step at its own β (one batched pair of
matrix multiplies over all replicas), then proposes swapping the states of neighbouring
replicas (t, t+1), alternately the even and the odd pairs (deterministic even-odd scheme),
accepted with probability ``min(1, exp(F_βt(x_t) + F_βt+1(x_t+1) − F_βt(x_t+1) − F_βt+1(x_t)))``
(Swendsen & Wang 1986; used for RBM training by Desjardins et al. 2010 and Cho et al. 2010).
Every chain state is a registered buffer, so persistent PT chains are checkpointed.
"""

from __future__ import annotations

import torch
from torch import nn

from shortrun.samplers.gibbs import RBMParams, block_gibbs


def beta_ladder(n_temps: int, beta_min: float = 0.0) -> torch.Tensor:
    """``n_temps`` inverse temperatures spaced evenly from 1 down to ``beta_min``."""
    if n_temps < 2:
        raise ValueError(f"parallel tempering needs at least 2 temperatures; got {n_temps}")
    if not 0.0 <= beta_min < 1.0:
        raise ValueError(f"beta_min must be in [0, 1); got {beta_min}")
    return torch.linspace(1.0, beta_min, n_temps)


class ParallelTempering(nn.Module):
    """``n_chains`` independent PT ladders; ``sweep`` returns the β = 1 replicas."""

    def __init__(self, n_chains: int, n_visible: int, betas: torch.Tensor) -> None:
        super().__init__()
        betas = torch.as_tensor(betas, dtype=torch.float32)
        if betas.dim() != 1 or len(betas) < 2 or float(betas[0]) != 1.0:
            raise ValueError("betas must be a 1-D ladder of >= 2 values starting at 1.0")
        self.register_buffer("betas", betas)
        self.register_buffer("states", torch.zeros(len(betas), n_chains, n_visible))
        self.register_buffer("parity", torch.zeros((), dtype=torch.long))
        self.register_buffer("accepted", torch.zeros(len(betas) - 1, dtype=torch.float64))
        self.register_buffer("proposed", torch.zeros(len(betas) - 1, dtype=torch.float64))
        self.last_swap_rate = 0.0

    def reset(self, v: torch.Tensor) -> None:
        """Start every replica of chain ``i`` at ``v[i]``."""
        self.states.copy_(v.to(self.states).expand_as(self.states))

    @torch.no_grad()
    def sweep(self, params: RBMParams, n_steps: int = 1,
              generator: torch.Generator | None = None) -> torch.Tensor:
        T, C, D = self.states.shape
        beta = self.betas.repeat_interleave(C)[:, None].to(params.W.dtype)
        x = self.states.to(params.W.dtype)
        for _ in range(n_steps):
            x = block_gibbs(params, x.reshape(T * C, D), 1, beta, generator).v.reshape(T, C, D)
            x = self.swap(params, x, generator)
        self.states.copy_(x)
        return self.states[0].clone()

    def swap(self, params: RBMParams, x: torch.Tensor,
             generator: torch.Generator | None = None) -> torch.Tensor:
        T, C, D = x.shape
        first = int(self.parity)
        self.parity.fill_(1 - first)
        i = torch.arange(first, T - 1, 2, device=x.device)
        if len(i) == 0:
            return x
        j = i + 1
        P = len(i)
        bi = self.betas[i].repeat_interleave(C).to(x.dtype)
        bj = self.betas[j].repeat_interleave(C).to(x.dtype)
        xi, xj = x[i].reshape(P * C, D), x[j].reshape(P * C, D)
        log_alpha = (params.free_energy(xi, bi) + params.free_energy(xj, bj)
                     - params.free_energy(xj, bi) - params.free_energy(xi, bj))
        u = torch.rand(P * C, generator=generator, dtype=log_alpha.dtype, device=x.device)
        accept = (torch.log(u) < log_alpha).reshape(P, C)
        new = x.clone()
        new[i] = torch.where(accept[..., None], x[j], x[i])
        new[j] = torch.where(accept[..., None], x[i], x[j])
        acc = accept.double().sum(1)
        self.accepted[i] += acc
        self.proposed[i] += C
        self.last_swap_rate = float(acc.sum()) / (P * C)
        return new

    def swap_rates(self) -> torch.Tensor:
        """Fraction of accepted swaps per neighbouring pair since the start."""
        return self.accepted / self.proposed.clamp_min(1)
