"""Text latent-space EBM: the LEBM prior over an autoregressive LSTM decoder (Pang, Han,
Nijkamp, Zhu, Wu, "Learning Latent Space Energy-Based Prior Model", NeurIPS 2020, §5.2 / Table 3).

``p_β(x|z) = Π_t p(x_t | x_<t, z)`` (:class:`shortrun.models.text_nets.TokenLSTM`, ``z``
initialising the LSTM state and concatenated to every input), ``p_α(z) ∝ exp(f_α(z)) N(0, σ_p²I)``.
Everything but the decoder is the image :class:`~shortrun.models.lebm.LEBM`: the prior energy
(the one place the paper's sign is translated), both short-run chains through the library's one
Langevin kernel, the optimisers and the learning step (``LEBM.training_step``). Only hooks
change: ``recon_energy`` — ``−log p_β(x|z)``, the teacher-forced LSTM log-likelihood summed over
tokens (continuous ``z``: autograd gives the posterior drift) — ``generator_loss``,
``−Σ_t log p_β(x_t|x_<t, z⁺)`` averaged over the batch, and ``training_batch`` (trim padding).

Evaluation (``shortrun eval RUN --metrics nll,fppl,rppl``; computed in
:mod:`shortrun.evaluation.text` from the pure methods ``log_px`` and ``log_partition`` here):

- ``nll``: ``−log p(x)`` per test sentence (nats), importance sampled
  (:func:`shortrun.metrics.text.importance_log_px`): ``model.nll_samples`` draws from a diagonal
  Gaussian fitted to ``model.nll_chains`` posterior chains per sentence; the EBM prior is
  normalised by ``log Z(α)`` from ``model.log_z_samples`` Monte-Carlo draws. ``nll_ppl`` is
  ``exp(Σ NLL / Σ tokens)``.
- ``fppl``: ``eval.n_samples`` sentences from the model scored by the ``lstm_lm`` run at
  ``model.lm_run`` (trained on real PTB by the ``lstm_lm_ptb`` recipe).
- ``rppl``: a fresh ``lstm_lm`` with the config of ``model.lm_run`` (``model.rppl_steps`` steps)
  trained by the one Trainer on those generated sentences, scored on the real test split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from shortrun.data.base import DataInfo
from shortrun.data.ptb import lengths, trim
from shortrun.fields import fld
from shortrun.models.damc import DAMCRecipeKeys
from shortrun.models.inputs import check_sample_args
from shortrun.models.lebm import LEBM, LatentPriorOptions
from shortrun.models.lebm_nets import PriorTilt
from shortrun.models.lstm_lm import text_vocab_size
from shortrun.models.text_nets import TokenLSTM, write_token_ids


@dataclass
class LEBMTextOptions(DAMCRecipeKeys, LatentPriorOptions):
    nz: int = fld(32, gt=0, doc="latent dimension (32 in the paper's text experiments)")
    emb: int = fld(256, gt=0, doc="decoder word-embedding size")
    hidden: int = fld(512, gt=0, doc="decoder LSTM hidden size")
    eval_post_steps: int | None = fld(None, gt=0, doc="posterior steps for nll; default post_steps")
    nll_chains: int = fld(8, gt=1, doc="posterior chains per sentence fitting the IS proposal")
    nll_samples: int = fld(100, gt=0, doc="importance samples per sentence")
    nll_sentences: int | None = fld(None, gt=0, doc="score only the first n test sentences")
    log_z_samples: int = fld(100_000, gt=0, doc="Monte-Carlo draws for log Z(α)")
    lm_run: str | None = fld(None, doc="run dir of an lstm_lm_ptb run (fppl, rppl)")
    rppl_steps: int = fld(2000, gt=0, doc="training steps of the reverse-perplexity LM")


class LEBMText(LEBM):
    Config = LEBMTextOptions

    # The constructor is LEBM's: ``LEBMText(generator=decoder, prior=...)`` with the decoder a
    # TokenLSTM (or anything with its ``log_prob(x, z)`` and ``generate(n, length, z, rng)``).

    @classmethod
    def from_config(cls, options: LEBMTextOptions, info: DataInfo) -> LEBMText:
        m = options
        decoder = TokenLSTM(text_vocab_size(info, cls.name), m.emb, m.hidden, m.nz)
        prior = PriorTilt(m.nz, m.ndf, m.prior_act) if m.prior == "ebm" else None
        model = cls(decoder, prior, options, info)
        model.user_networks = ()
        return model

    def setup(self, info: DataInfo) -> None:
        """A DAMC source built from the options encodes token ids (a mean word embedding)."""
        if getattr(self.options, "prior_sampler", "langevin") == "damc":
            self.build_chains(info, text_vocab_size(info, self.name))

    def init_z(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``N(0, init_sigma²I)`` in the decoder's dtype (float64 models check gradients)."""
        w = self.generator.out.weight
        return self.options.init_sigma * torch.randn(
            (n, self.options.nz), generator=generator, device=w.device, dtype=w.dtype)

    def recon_energy(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``−log p_β(x|z) = −Σ_t log p(x_t | x_<t, z)`` over the non-pad tokens (exact)."""
        return -self.generator.log_prob(x, z)

    def prior_log_density(self, z: torch.Tensor, log_z: float) -> torch.Tensor:
        """Normalised ``log p_α(z) = −E_α(z) − log Z(α) − (nz/2) log 2πσ_p²`` (Eq. 1)."""
        s = self.options.prior_sigma
        return -self.prior_energy(z) - log_z - 0.5 * z.shape[1] * math.log(2 * math.pi * s * s)

    def training_batch(self, batch: torch.Tensor) -> torch.Tensor:
        """The batch trimmed to its longest sentence."""
        return trim(batch)

    def generator_loss(self, x: torch.Tensor, z: torch.Tensor,
                       ) -> tuple[torch.Tensor, dict[str, float]]:
        """``mean −log p_β(x|z⁺)``; logs the posterior perplexity ``ppl_post`` of the batch."""
        nll = self.recon_energy(z, x)
        ntok = float((lengths(x) - 1).sum())
        return nll.mean(), {"ppl_post": math.exp(float(nll.detach().sum()) / ntok)}

    @torch.no_grad()
    def sample(self, n, steps=None, generator=None):
        check_sample_args(n, steps, generator)
        z = self.sample_prior(n, steps or self.sample_steps, generator)
        return self.generator.generate(n, self.require_info("sample").shape[0], z, generator)

    def draw(self, path, n):
        write_token_ids(self.sample(n), self.reference_data, Path(path).with_suffix(".txt"))

    # --- evaluation ------------------------------------------------------------------------
    def log_px(self, x: torch.Tensor, log_z: float,
               generator: torch.Generator | None = None) -> torch.Tensor:
        """Importance-sampled ``log p(x)`` per sentence (see the module docstring)."""
        from shortrun.metrics.text import fit_gaussian, importance_log_px

        m: LEBMTextOptions = self.options
        x = trim(x)
        rep = x.repeat(m.nll_chains, 1)
        z = self.sample_posterior(rep, m.eval_post_steps, generator)
        mean, std = fit_gaussian(z.view(m.nll_chains, x.shape[0], -1))

        def log_joint(zk: torch.Tensor) -> torch.Tensor:
            return self.generator.log_prob(x, zk) + self.prior_log_density(zk, log_z)

        return importance_log_px(log_joint, mean, std, m.nll_samples, generator)

    def log_partition(self, generator: torch.Generator | None = None) -> float:
        """``log Z(α)``; exactly 0 for the Gaussian prior."""
        from shortrun.metrics.text import log_partition

        if self.tilt is None:
            return 0.0
        m: LEBMTextOptions = self.options
        return log_partition(self.tilt_value, m.nz, m.prior_sigma, m.log_z_samples,
                             generator=generator)
