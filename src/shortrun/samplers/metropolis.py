"""The Metropolis–Hastings accept/reject step shared by MALA, HMC and independence MH
(Hastings 1970; accept with probability ``min(1, α)``, every chain of the batch on its own)."""

from __future__ import annotations

from typing import NamedTuple

import torch


class MCMCInfo(NamedTuple):
    """Per-chain acceptance rate over the run and the energy of the final state."""

    acceptance_rate: torch.Tensor
    energy: torch.Tensor

    @property
    def mean_acceptance(self) -> float:
        return float(self.acceptance_rate.mean())


def mh_accept(log_alpha: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One boolean per chain: ``log u < log α`` with ``u ~ U(0, 1)``. A NaN ``log α`` (an
    energy that overflowed at the proposal) rejects rather than poisoning the chain."""
    u = torch.rand(log_alpha.shape[0], generator=generator, device=log_alpha.device)
    return torch.log(u) < torch.nan_to_num(log_alpha, nan=-float("inf"))


def where_rows(accept: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """``new`` in the rows (chains) where ``accept`` holds, ``old`` elsewhere."""
    return torch.where(accept.view(-1, *([1] * (new.dim() - 1))), new, old)
