"""A Metropolis kernel for energies over binary vectors, so AIS
(:func:`~shortrun.estimators.annealing.ais_chains`) also walks discrete paths, and a factorised
Bernoulli base for it.

:func:`bit_flip_sweep` visits every coordinate in turn and proposes flipping it; the proposal is
symmetric, so accepting with probability ``min(1, exp(E(x) − E(x′)))`` (Metropolis et al. 1953,
through the library's shared :func:`~shortrun.samplers.metropolis.mh_accept`) leaves
``exp(−E)`` invariant. One sweep costs ``d`` energy evaluations: meant for a few dozen bits
(e.g. the hidden layer of an RBM, whose free energy ``F(h)`` has the RBM's ``log Z``).
"""

from __future__ import annotations

import torch

from shortrun.samplers.metropolis import mh_accept, where_rows


def bit_flip_sweep(energy, x: torch.Tensor,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, float]:
    """One systematic Metropolis sweep of single-bit flips over the columns of ``x``
    ``(B, d)``; returns the new states and the mean acceptance."""
    with torch.no_grad():
        e = energy(x)
        accepted = 0.0
        for j in range(x.shape[1]):
            y = x.clone()
            y[:, j] = 1 - y[:, j]
            e_y = energy(y)
            acc = mh_accept(e - e_y, generator)
            x, e = where_rows(acc, y, x), torch.where(acc, e_y, e)
            accepted += float(acc.float().mean())
    return x, accepted / x.shape[1]


class BernoulliBase:
    """Independent Bernoulli units with logits ``logits`` ``(d,)``: normalised log-density and
    exact draws (the base-rate model of Salakhutdinov & Murray 2008, Eq. 14-15)."""

    def __init__(self, logits: torch.Tensor):
        self.logits = logits.reshape(-1)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        lg = self.logits.to(x.dtype)
        return x @ lg - torch.nn.functional.softplus(lg).sum()

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        p = torch.sigmoid(self.logits).expand(n, -1)
        return (torch.rand(p.shape, generator=generator, dtype=p.dtype) < p).to(p.dtype)
