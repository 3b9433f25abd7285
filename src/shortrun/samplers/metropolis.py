"""The one Metropolis–Hastings accept/reject step, shared by MALA, HMC, independence MH and the
parallel-tempering swap (Metropolis et al. 1953; Hastings 1970): accept with probability
``min(1, α)``, every chain of the batch on its own."""

from __future__ import annotations

from typing import NamedTuple, TypeVar

import torch

State = TypeVar("State", bound=tuple)


class MCMCInfo(NamedTuple):
    """Per-chain acceptance rate over a run of several steps and the energy of the final
    state (what the multi-step drivers ``mala``, ``hmc``, ``independence_mh`` return)."""

    acceptance_rate: torch.Tensor
    energy: torch.Tensor

    @property
    def mean_acceptance(self) -> float:
        return float(self.acceptance_rate.mean())


def mh_accept(log_alpha: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One boolean per entry of ``log_alpha``: ``log u < log α`` with ``u ~ U(0, 1)``.

    A NaN ``log α`` (an energy that overflowed at the proposal) rejects rather than poisoning
    the chain; infinities keep their meaning (``+inf`` accepts, ``−inf`` rejects). ``u`` is
    drawn in float64 when ``log α`` is float64, else in float32.
    """
    dtype = torch.float64 if log_alpha.dtype == torch.float64 else torch.float32
    u = torch.rand(log_alpha.shape, generator=generator, device=log_alpha.device, dtype=dtype)
    inf = float("inf")
    return torch.log(u) < torch.nan_to_num(log_alpha, nan=-inf, posinf=inf, neginf=-inf)


def where_rows(accept: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """``new`` in the rows (chains) where ``accept`` holds, ``old`` elsewhere."""
    return torch.where(accept.view(-1, *([1] * (new.dim() - 1))), new, old)


def mh_select(log_alpha: torch.Tensor, proposal: State, current: State,
              generator: torch.Generator | None = None) -> tuple[State, torch.Tensor]:
    """Accept or reject a proposed kernel state chain by chain: every field of the state
    NamedTuple is taken from ``proposal`` where accepted, from ``current`` elsewhere.
    Returns the new state and the per-chain acceptance."""
    accept = mh_accept(log_alpha, generator)
    chosen = (where_rows(accept, new, old) for new, old in zip(proposal, current, strict=True))
    return type(current)(*chosen), accept
