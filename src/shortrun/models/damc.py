"""Diffusion-amortized MCMC for the latent EBM prior (Yu, Zhu, Xie, Ma, Gao, Zhu, Wu, "Learning
Energy-Based Prior Model with Diffusion-Amortized MCMC", NeurIPS 2023): ``model.prior_sampler:
damc`` of :class:`~shortrun.models.lebm.LEBM` and :class:`~shortrun.models.lebm_text.LEBMText`.

The short-run chains of Pang et al. (2020) start from ``N(0, I)`` every iteration. DAMC starts
them from a learned sampler ``q_φ`` instead and trains ``q_φ`` on where the chains end:
§3.2's update ``φ_{k+1} = argmin_φ KL(K_T q_{φ_k} ‖ q_φ)`` (``K_T`` the T-step Langevin
kernel), fitted by the diffusion model's denoising loss on the chains' outputs. Since ``K_T``
never increases the KL to its stationary law, iterating the update makes ``q_φ`` a sampler
of the long-run chain: the amortized chain behaves like a long one at a short one's cost.

:class:`DAMCChains` is the LEBM's chain source in this mode. Per training iteration, in the
order of the authors' ``train_gen_recon.py`` / ``train_anomaly_det.py``:

1. ``z₀ ~ q_φ̄(z | x)`` from the slow-moving copy ``φ̄`` (an EMA of ``φ``) for the batch;
2. posterior chain from ``z₀`` (``post_steps`` steps, the LEBM's own chain and kernel);
3. prior chain from ``z₀`` — and, with ``damc_noise_chains``, as many more from ``N(0, I)``
   (the generation script; the anomaly script uses ``z₀`` alone);
4. ``damc_updates`` AdamW steps of ``φ`` on the denoising loss of ``(x, z⁺)``, the condition
   dropped with probability ``damc_mask_prob`` so the same net learns ``q_φ(z)``
   (``damc_uncond: both`` instead adds the unconditional loss on every example, as the anomaly
   script does);
5. the LEBM's generator and EBM updates, unchanged;
6. every ``damc_ema_every`` iterations ``φ̄ ← (1 − ρ) φ̄ + ρ φ``, ``ρ = damc_ema``.

After training, ``sample`` draws ``z ~ q_φ(z)`` and runs ``damc_sample_steps`` prior steps
(0: the amortizer alone, the paper's FID protocol); ``reconstruct`` / ``anomaly_score`` start
the posterior chain at ``q_φ(z | x)``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from shortrun.models.damc_nets import LatentDiffusionAmortizer, make_encoder


def build_amortizer(options: Any, shape: tuple[int, ...], kind: str,
                    vocab: int | None = None) -> LatentDiffusionAmortizer:
    """The amortizer named by a latent-prior options object's ``damc_*`` fields."""
    m = options
    encoder = make_encoder(tuple(shape), kind, m.damc_emb, m.damc_encoder_width, vocab)
    return LatentDiffusionAmortizer(m.nz, encoder, m.damc_emb, m.damc_width, m.damc_time_emb,
                                    m.damc_steps, m.damc_logsnr_min, m.damc_logsnr_max)


class DAMCChains(nn.Module):
    """The chain source of the DAMC mode: the amortizer ``φ`` and its EMA copy ``φ̄``.

    Both are submodules, so they are saved with the model and restored on resume; ``φ̄``
    takes no gradient (its parameters never require grad and no optimiser holds them)."""

    def __init__(self, amortizer: LatentDiffusionAmortizer) -> None:
        super().__init__()
        self.amortizer = amortizer
        self.target = copy.deepcopy(amortizer)
        for p in self.target.parameters():
            p.requires_grad_(False)

    def start_posterior(self, x: torch.Tensor, generator: torch.Generator | None = None,
                        slow: bool = False) -> torch.Tensor:
        """``z₀ ~ q(z | x)``: from ``φ̄`` when ``slow`` (inside the update), else from ``φ``."""
        net = self.target if slow else self.amortizer
        return net.sample(x.shape[0], x, generator)

    def start_prior(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``z₀ ~ q_φ(z)``: the amortizer with its condition dropped."""
        return self.amortizer.sample(n, None, generator)

    def learn(self, x: torch.Tensor, z_pos: torch.Tensor, optimizer: torch.optim.Optimizer,
              step: int, options: Any,
              optimizer_step: Callable[..., Any]) -> dict[str, float]:
        """Steps 4 and 6 of the module docstring; returns ``loss_amortizer`` (the last step's)."""
        m = options
        z = z_pos.detach()
        params = list(self.amortizer.parameters())
        loss = torch.zeros(())
        for _ in range(m.damc_updates):
            if m.damc_uncond == "both":
                loss = self.amortizer.loss(z, x).mean() + self.amortizer.loss(z, None).mean()
            else:
                loss = self.amortizer.loss(z, x, m.damc_mask_prob).mean()
            optimizer_step(optimizer, loss, params)
        if (step + 1) % m.damc_ema_every == 0:
            self.update_target(m.damc_ema)
        return {"loss_amortizer": float(loss.detach())}

    @torch.no_grad()
    def update_target(self, rate: float) -> None:
        """``φ̄ ← (1 − rate) φ̄ + rate φ`` (buffers copied)."""
        for p_slow, p in zip(self.target.parameters(), self.amortizer.parameters(), strict=True):
            p_slow.lerp_(p, rate)
        for b_slow, b in zip(self.target.buffers(), self.amortizer.buffers(), strict=True):
            b_slow.copy_(b)
