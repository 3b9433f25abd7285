"""Diffusion-amortized MCMC for the latent EBM prior (Yu, Zhu, Xie, Ma, Gao, Zhu, Wu, "Learning
Energy-Based Prior Model with Diffusion-Amortized MCMC", NeurIPS 2023): a chain source of
:class:`~shortrun.models.lebm.LEBM` and :class:`~shortrun.models.lebm_text.LEBMText`,
``LEBM(generator, prior, chains=DAMC(amortizer, DAMCOptions(...)))``; from a recipe,
``model.prior_sampler: damc`` with the ``model.damc_*`` keys (:class:`DAMCRecipeKeys`).

The short-run chains of Pang et al. (2020) start from ``N(0, I)`` every iteration. DAMC starts
them from a learned sampler ``q_φ`` instead and trains ``q_φ`` on where the chains end:
§3.2's update ``φ_{k+1} = argmin_φ KL(K_T q_{φ_k} ‖ q_φ)`` (``K_T`` the T-step Langevin
kernel), fitted by the diffusion model's denoising loss on the chains' outputs. Since ``K_T``
never increases the KL to its stationary law, iterating the update makes ``q_φ`` a sampler
of the long-run chain: the amortized chain behaves like a long one at a short one's cost.

Per training iteration, in the order of the authors' ``train_gen_recon.py`` /
``train_anomaly_det.py``:

1. ``z₀ ~ q_φ̄(z | x)`` from the slow-moving copy ``φ̄`` (an EMA of ``φ``) for the batch;
2. posterior chain from ``z₀`` (``post_steps`` steps, the LEBM's own chain and kernel);
3. prior chain from ``z₀`` — and, with ``noise_chains``, as many more from ``N(0, I)``
   (the generation script; the anomaly script uses ``z₀`` alone);
4. ``updates`` AdamW steps of ``φ`` on the denoising loss of ``(x, z⁺)``, the condition
   dropped with probability ``mask_prob`` so the same net learns ``q_φ(z)``
   (``uncond: both`` instead adds the unconditional loss on every example, as the anomaly
   script does);
5. the LEBM's generator and EBM updates, unchanged;
6. every ``ema_every`` iterations ``φ̄ ← (1 − ρ) φ̄ + ρ φ``, ``ρ = ema``.

After training, ``sample`` draws ``z ~ q_φ(z)`` and runs ``sample_steps`` prior steps
(0: the amortizer alone, the paper's FID protocol); ``reconstruct`` / ``anomaly_score`` start
the posterior chain at ``q_φ(z | x)``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from shortrun.errors import ConfigError
from shortrun.fields import check_bounds, fld
from shortrun.models.base import ModelOptions
from shortrun.models.damc_nets import LatentDiffusionAmortizer, make_encoder
from shortrun.models.latent_chains import Noise, ShortRunChains


@dataclass
class DAMCOptions:
    """How the DAMC source starts the chains and learns (steps 3, 4, 6 of the module doc)."""

    updates: int = fld(6, gt=0, doc="amortizer steps per iteration")
    mask_prob: float = fld(0.2, ge=0, le=1, doc="probability of dropping x from a target")
    uncond: str = fld("dropout", choices=("dropout", "both"),
                      doc="dropout: mask_prob per example; both: conditional + "
                          "unconditional loss on every example (anomaly script)")
    ema: float = fld(0.005, gt=0, le=1, doc="rate of the slow copy that starts the chains")
    ema_every: int = fld(10, gt=0, doc="iterations between slow-copy updates")
    noise_chains: bool = fld(True, doc="also start as many prior chains from N(0, I)")
    sample_steps: int = fld(0, ge=0, doc="prior steps after q(z) in sample(); 0: none")
    lr: float | None = fld(None, gt=0, doc="AdamW lr of the amortizer; default train.lr")
    weight_decay: float | None = fld(None, ge=0, doc="AdamW weight decay; default "
                                                     "train.weight_decay")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            problem = check_bounds(f"DAMCOptions.{f.name}", getattr(self, f.name), f.metadata)
            if problem:
                raise ConfigError(problem)


# recipe key -> DAMCOptions field: the keys keep their names (a contract); the source's own
# options drop the prefix
RECIPE_KEYS = {"damc_updates": "updates", "damc_mask_prob": "mask_prob",
               "damc_uncond": "uncond", "damc_ema": "ema", "damc_ema_every": "ema_every",
               "damc_noise_chains": "noise_chains", "damc_sample_steps": "sample_steps",
               "lr_amortizer": "lr", "weight_decay_amortizer": "weight_decay"}


@dataclass
class DAMCRecipeKeys(ModelOptions):
    """The recipe keys of the DAMC source (sizes of the authors' code), mixed into the latent
    models' options so ``model.prior_sampler: damc`` and ``model.damc_*`` stay recipe keys."""

    prior_sampler: str = fld("langevin", choices=("langevin", "damc"),
                             doc="langevin: chains from N(0, I) (Pang et al. 2020); damc: from "
                                 "a learned diffusion amortizer (Yu et al. 2023)")
    damc_width: int = fld(128, gt=0, doc="amortizer noise-net width w (layers w, 2w, 2w)")
    damc_emb: int = fld(1024, gt=0, doc="amortizer condition-embedding size")
    damc_time_emb: int = fld(128, gt=0, doc="amortizer noise-level embedding size")
    damc_encoder_width: int = fld(64, gt=0, doc="amortizer encoder base width (nif)")
    damc_steps: int = fld(100, ge=2, doc="diffusion sampling steps of the amortizer")
    damc_logsnr_min: float = fld(-5.1, doc="log-SNR at t = 1 (most noise)")
    damc_logsnr_max: float = fld(9.8, doc="log-SNR at t = 0 (least noise)")
    damc_mask_prob: float = fld(0.2, ge=0, le=1,
                                doc="probability of dropping x from an amortizer target")
    damc_uncond: str = fld("dropout", choices=("dropout", "both"),
                           doc="dropout: damc_mask_prob per example; both: conditional + "
                               "unconditional loss on every example (anomaly script)")
    damc_updates: int = fld(6, gt=0, doc="amortizer steps per iteration")
    damc_ema: float = fld(0.005, gt=0, le=1, doc="rate of the slow copy that starts the chains")
    damc_ema_every: int = fld(10, gt=0, doc="iterations between slow-copy updates")
    damc_noise_chains: bool = fld(True, doc="also start as many prior chains from N(0, I)")
    damc_sample_steps: int = fld(0, ge=0, doc="prior steps after q(z) in sample(); 0: none")
    lr_amortizer: float | None = fld(None, gt=0, doc="AdamW lr of the amortizer; default train.lr")
    weight_decay_amortizer: float | None = fld(None, ge=0,
                                               doc="AdamW weight decay; default train.weight_decay")


def chains_from_recipe(options: Any, nz: int, shape: tuple[int, ...], kind: str,
                       vocab: int | None = None) -> DAMC | None:
    """The source named by a latent model's recipe keys: a :class:`DAMC` with
    ``prior_sampler: damc``, else None (the model's default, :class:`ShortRunChains`)."""
    if getattr(options, "prior_sampler", "langevin") != "damc":
        return None
    m = options
    amortizer = build_amortizer(nz, shape, kind, vocab, width=m.damc_width, emb=m.damc_emb,
                                time_emb=m.damc_time_emb, encoder_width=m.damc_encoder_width,
                                steps=m.damc_steps, logsnr_min=m.damc_logsnr_min,
                                logsnr_max=m.damc_logsnr_max)
    return DAMC(amortizer, DAMCOptions(**{f: getattr(m, k) for k, f in RECIPE_KEYS.items()}))


def build_amortizer(nz: int, shape: tuple[int, ...], kind: str, vocab: int | None = None, *,
                    width: int = 128, emb: int = 1024, time_emb: int = 128,
                    encoder_width: int = 64, steps: int = 100, logsnr_min: float = -5.1,
                    logsnr_max: float = 9.8) -> LatentDiffusionAmortizer:
    """The amortizer ``q_φ(z | x)`` over ``nz`` latents for data of ``shape`` and ``kind``
    (defaults: the sizes of the authors' code)."""
    encoder = make_encoder(tuple(shape), kind, emb, encoder_width, vocab)
    return LatentDiffusionAmortizer(nz, encoder, emb, width, time_emb, steps, logsnr_min,
                                    logsnr_max)


class DAMC(ShortRunChains):
    """The DAMC chain source: the amortizer ``φ`` and its EMA copy ``φ̄``.

    Both are submodules, so they are saved with the model and restored on resume; ``φ̄``
    takes no gradient (its parameters never require grad and no optimiser holds them)."""

    def __init__(self, amortizer: LatentDiffusionAmortizer,
                 options: DAMCOptions | None = None) -> None:
        super().__init__()
        self.options = options if options is not None else DAMCOptions()
        self.amortizer = amortizer
        self.target = copy.deepcopy(amortizer)
        for p in self.target.parameters():
            p.requires_grad_(False)

    # --- where the chains start ------------------------------------------------------------
    def start_prior(self, n: int, noise: Noise, generator: torch.Generator | None = None,
                    ) -> tuple[torch.Tensor, int | None]:
        """``z₀ ~ q_φ(z)`` (the condition dropped), then ``sample_steps`` prior steps."""
        return self.amortizer.sample(n, None, generator), self.options.sample_steps

    def start_posterior(self, x: torch.Tensor, noise: Noise | None = None,
                        generator: torch.Generator | None = None,
                        slow: bool = False) -> torch.Tensor:
        """``z₀ ~ q(z | x)``: from ``φ̄`` when ``slow`` (inside the update), else from ``φ``."""
        net = self.target if slow else self.amortizer
        return net.sample(x.shape[0], x, generator)

    def training_posterior_start(self, x: torch.Tensor, noise: Noise) -> torch.Tensor:
        return self.start_posterior(x, slow=True)

    def training_prior_start(self, z0: torch.Tensor, noise: Noise) -> torch.Tensor:
        """``z₀``, and as many chains from ``N(0, init_sigma²I)`` with ``noise_chains``."""
        return torch.cat([z0, noise(z0.shape[0], None)]) if self.options.noise_chains else z0

    # --- learning ----------------------------------------------------------------------------
    def build_optimizers(self, optim: Any) -> dict[str, torch.optim.Optimizer]:
        """AdamW as in the authors' code; ``lr`` / ``weight_decay`` unset fall back to
        ``train.lr`` / ``train.weight_decay`` like every ``lr_<net>``."""
        o = self.options
        lr = optim.lr if o.lr is None else o.lr
        wd = optim.weight_decay if o.weight_decay is None else o.weight_decay
        return {"amortizer": torch.optim.AdamW(self.amortizer.parameters(), lr=lr,
                                               betas=optim.betas, weight_decay=wd)}

    def learn(self, x: torch.Tensor, z_pos: torch.Tensor,
              optimizers: dict[str, torch.optim.Optimizer], step: int,
              optimizer_step: Callable[..., Any]) -> dict[str, float]:
        """Steps 4 and 6 of the module docstring; returns ``loss_amortizer`` (the last step's)."""
        if "amortizer" not in optimizers:
            raise ConfigError("LEBM(prior_sampler='damc'): the amortizer is built when the model "
                              "knows its data; bind it (info=...) before build_optimizers()")
        o = self.options
        z = z_pos.detach()
        params = list(self.amortizer.parameters())
        loss = torch.zeros(())
        for _ in range(o.updates):
            if o.uncond == "both":
                loss = self.amortizer.loss(z, x).mean() + self.amortizer.loss(z, None).mean()
            else:
                loss = self.amortizer.loss(z, x, o.mask_prob).mean()
            optimizer_step(optimizers["amortizer"], loss, params)
        if (step + 1) % o.ema_every == 0:
            self.update_target(o.ema)
        return {"loss_amortizer": float(loss.detach())}

    @torch.no_grad()
    def update_target(self, rate: float) -> None:
        """``φ̄ ← (1 − rate) φ̄ + rate φ`` (buffers copied)."""
        for p_slow, p in zip(self.target.parameters(), self.amortizer.parameters(), strict=True):
            p_slow.lerp_(p, rate)
        for b_slow, b in zip(self.target.buffers(), self.amortizer.buffers(), strict=True):
            b_slow.copy_(b)


DAMCChains = DAMC  # the earlier name, kept for code that imports it


def rename_old_checkpoint_keys(module: nn.Module, state_dict: dict, prefix: str,
                               *_: Any) -> None:
    """A ``load_state_dict`` pre-hook: checkpoints written before the source moved from the
    model's ``damc`` attribute to ``chains`` load unchanged."""
    old = prefix + "damc."
    for key in [k for k in state_dict if k.startswith(old)]:
        state_dict[prefix + "chains." + key[len(old):]] = state_dict.pop(key)
