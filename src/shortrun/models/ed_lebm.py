"""The latent EBM prior of Pang et al. (2020) learned by energy discrepancy (model ``ed_lebm``).

:class:`~shortrun.models.lebm.LEBM` learns its prior by maximum likelihood, with negatives from
a short-run prior chain. Here the prior step is
:func:`~shortrun.objectives.energy_discrepancy.energy_discrepancy` on the prior energy
``E_α(z) = −f_α(z) + ‖z‖²/(2σ_p²)`` at the posterior samples ``z⁺``, with Gaussian
perturbations of ``z⁺`` (Schröder et al. 2023, the latent-space experiment): the prior chain is
gone from training. Everything else is the LEBM's: the posterior chain (from ``N(0, I)``, or
from DAMC's amortizer with ``prior_sampler: damc``), the generator's loss and optimiser, and
sampling, which still runs the prior's Langevin chain (``prior_steps``) after training.

``prior_ema`` > 0 keeps an exponential moving average of the tilt ``f_α``; :meth:`sample` draws
from the averaged prior (the ED-LEBM protocol's EMA 0.999), the posterior chain uses the live
one.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from shortrun.data.base import DataInfo
from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.lebm import LEBM, LEBMOptions, frozen
from shortrun.objectives.energy_discrepancy import energy_discrepancy


@dataclass
class EDLEBMOptions(LEBMOptions):
    ed_t: float = fld(0.25, gt=0, doc="t, the variance of each Gaussian perturbation of z⁺")
    ed_m: int = fld(16, gt=0, doc="M, perturbed latents per posterior sample")
    ed_w: float = fld(1.0, ge=0, doc="the stabiliser w (0: the plain estimator)")
    prior_ema: float = fld(0.0, ge=0, lt=1, doc="rate of the tilt's moving average that "
                                               "sample() uses (0: none, the live tilt)")


class EDLEBM(LEBM):
    """``EDLEBM(generator, PriorTilt(nz), ed_m=16, ed_t=0.25)``: an :class:`LEBM` whose prior
    learns by energy discrepancy; the EBM prior is required (``prior='ebm'``)."""

    Config = EDLEBMOptions

    def __init__(self, generator: nn.Module, prior: nn.Module | None = None,
                 options: EDLEBMOptions | None = None, info: DataInfo | None = None,
                 **option_values: Any) -> None:
        if prior is None:
            raise ConfigError("EDLEBM learns the EBM prior by energy discrepancy: pass a prior "
                              "network (e.g. PriorTilt(nz)) and keep prior='ebm'; for the "
                              "Gaussian prior use LEBM(prior=None)")
        super().__init__(generator, prior, options, info, **option_values)
        self.tilt_ema: nn.Module | None = None
        if self.options.prior_ema > 0:
            self.tilt_ema = copy.deepcopy(prior).requires_grad_(False)

    def posterior_samples(self, x: torch.Tensor) -> torch.Tensor:
        """``z⁺``: the posterior chain from the chain source's training start (DAMC: the
        amortizer's slow copy); the default source's start is ``sample_posterior``'s own."""
        if self.damc is None:
            return self.sample_posterior(x)
        with frozen(self):
            z0 = self.chains.training_posterior_start(x, self.init_z)
        return self.sample_posterior(x, start=z0)

    def training_step(self, batch, step, optimizers):
        """Posterior chain, [DAMC: amortizer steps], generator step, prior step by ED."""
        m: EDLEBMOptions = self.options
        x = self.training_batch(batch)
        z_pos = self.posterior_samples(x)
        metrics = dict(self.chains.learn(x, z_pos, optimizers, step, self.optimizer_step))
        loss_g, extra = self.generator_loss(x, z_pos)
        self.optimizer_step(optimizers["generator"], loss_g, self.generator.parameters())
        metrics.update({"loss": float(loss_g.detach()), **extra})
        out = energy_discrepancy(self.prior_energy, z_pos.detach(), m=m.ed_m, w=m.ed_w,
                                 perturbation="gaussian", t=m.ed_t)
        self.optimizer_step(optimizers["prior"], out.loss, self.tilt.parameters())
        metrics.update({("loss_prior" if k == "loss" else k): v for k, v in out.metrics.items()})
        if self.tilt_ema is not None:
            with torch.no_grad():
                for p, q in zip(self.tilt.parameters(), self.tilt_ema.parameters(), strict=True):
                    q.lerp_(p, 1 - m.prior_ema)
        return metrics

    @contextlib.contextmanager
    def averaged_prior(self) -> Iterator[None]:
        """Inside the block the prior is the moving average (when ``prior_ema`` > 0)."""
        if self.tilt_ema is None:
            yield
            return
        live, self.tilt = self.tilt, self.tilt_ema
        try:
            yield
        finally:
            self.tilt = live

    @torch.no_grad()
    def sample(self, n, steps=None, generator=None):
        with self.averaged_prior():
            return super().sample(n, steps, generator)
