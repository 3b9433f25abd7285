"""Where the latent EBM's short-run chains start: the chain sources of
:class:`~shortrun.models.lebm.LEBM` (``LEBM(generator, prior, chains=...)``).

A source answers three questions and may learn from the answers' outcome:

- ``start_prior(n, noise, generator)``: the start of ``n`` prior chains, and how many prior steps
  follow it in ``sample()`` when the caller names none (``None``: the model's ``prior_steps``);
- ``start_posterior(x, noise, generator)``: the start of the posterior chains of ``x`` at use
  (``reconstruct``, anomaly scores);
- inside a training iteration, ``training_posterior_start(x, noise)`` and then, after the
  posterior chain has run, ``training_prior_start(z0, noise)`` (``z0`` the posterior start);
- ``build_optimizers(optim)`` and ``learn(x, z_pos, optimizers, step, optimizer_step)``: the
  source's own networks and their update, run after both chains and before the generator step.

``noise(n, generator)`` is the model's ``N(0, init_sigma²I)`` draw in its dtype and device.
:class:`ShortRunChains`, the default, is the source of Pang et al. (2020), §3.3: every chain
starts from that noise and nothing learns. :class:`shortrun.models.damc.DAMC` starts them from a
learned diffusion sampler (Yu et al. 2023).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

Noise = Callable[[int, "torch.Generator | None"], torch.Tensor]


class ShortRunChains(nn.Module):
    """Every chain from ``N(0, init_sigma²I)`` (Pang et al. 2020, Eq. 9-10); no state, no
    parameters, nothing to learn. Subclass it to start the chains elsewhere."""

    def start_prior(self, n: int, noise: Noise, generator: torch.Generator | None = None,
                    ) -> tuple[torch.Tensor, int | None]:
        return noise(n, generator), None

    def start_posterior(self, x: torch.Tensor, noise: Noise,
                        generator: torch.Generator | None = None) -> torch.Tensor:
        return noise(x.shape[0], generator)

    def training_posterior_start(self, x: torch.Tensor, noise: Noise) -> torch.Tensor:
        return noise(x.shape[0], None)

    def training_prior_start(self, z0: torch.Tensor, noise: Noise) -> torch.Tensor:
        return noise(z0.shape[0], None)

    def build_optimizers(self, optim: Any) -> dict[str, torch.optim.Optimizer]:
        return {}

    def learn(self, x: torch.Tensor, z_pos: torch.Tensor,
              optimizers: dict[str, torch.optim.Optimizer], step: int,
              optimizer_step: Callable[..., Any]) -> dict[str, float]:
        return {}
