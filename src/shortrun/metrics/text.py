"""Likelihood and perplexity estimates for text models.

- :func:`perplexity`: ``exp(Σ NLL / Σ tokens)`` over a corpus, tokens = the scored targets of
  :mod:`shortrun.models.text_nets` (words and ``</s>``, not ``<s>``/``<pad>``).
- :func:`log_partition`: ``log Z(α) = log E_{z~N(0,σ_p²I)}[exp f_α(z)]`` of the LEBM prior
  ``p_α(z) = exp(f_α(z)) N(0, σ_p²I) / Z(α)`` (Pang et al. 2020 Eq. 1), by plain Monte Carlo.
- :func:`importance_log_px`: ``log p(x) ≈ log (1/K) Σ_k p_β(x|z_k) p_α(z_k) / q(z_k)``,
  ``z_k ~ q`` (Burda et al. 2016's importance-sampled estimate, the one text-VAE papers report
  as NLL), with ``q(z|x)`` a diagonal Gaussian fitted to the end points of several short-run
  posterior chains per sentence (:func:`fit_gaussian`). In expectation it is a lower bound on
  ``log p(x)`` (Jensen), so the reported NLL is an upper bound up to the Monte-Carlo error of
  ``log Z``; it is exact when ``q`` is the posterior.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import torch

from shortrun.data.ptb import lengths

LOG_2PI = math.log(2 * math.pi)


def perplexity(log_prob: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
               batch_size: int = 500) -> float:
    """``exp(−Σ log p(sentence) / Σ scored tokens)`` over the rows of ``x``."""
    total, tokens = 0.0, 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch_size):
            b = x[i: i + batch_size]
            total -= float(log_prob(b).sum())
            tokens += int((lengths(b) - 1).sum())
    return math.exp(total / tokens)


def gaussian_log_density(z: torch.Tensor, mean: torch.Tensor | float,
                         std: torch.Tensor | float) -> torch.Tensor:
    """``log N(z; mean, diag(std²))`` summed over the last dimension."""
    std = torch.as_tensor(std, dtype=z.dtype)
    r = (z - mean) / std
    return -(0.5 * r.pow(2) + std.log() + 0.5 * LOG_2PI).sum(-1)


@torch.no_grad()
def log_partition(f: Callable[[torch.Tensor], torch.Tensor], nz: int, sigma: float,
                  n: int = 100_000, batch_size: int = 10_000,
                  generator: torch.Generator | None = None) -> float:
    """``log E_{N(0,σ²I)}[exp f(z)]`` from ``n`` draws (log-mean-exp, stable)."""
    vals = []
    for i in range(0, n, batch_size):
        z = sigma * torch.randn((min(batch_size, n - i), nz), generator=generator)
        vals.append(f(z).double())
    v = torch.cat(vals)
    return float(torch.logsumexp(v, 0) - math.log(v.numel()))


def fit_gaussian(chains: torch.Tensor, min_std: float = 0.05) -> tuple[torch.Tensor,
                                                                         torch.Tensor]:
    """Mean and std over the chain axis of ``(S, B, nz)`` end points; the std is floored (a
    proposal narrower than the posterior makes the importance weights heavy-tailed)."""
    mean = chains.mean(0)
    std = chains.std(0, unbiased=True).clamp_min(min_std) if chains.shape[0] > 1 else \
        torch.full_like(mean, 1.0)
    return mean, std


@torch.no_grad()
def importance_log_px(log_joint: Callable[[torch.Tensor], torch.Tensor], mean: torch.Tensor,
                      std: torch.Tensor, k: int,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """``log (1/K) Σ_k exp(log_joint(z_k) − log q(z_k))``, ``z_k ~ N(mean, std²)``: ``(B,)``.

    ``log_joint(z)`` takes ``(B, nz)`` and returns ``log p(x_b, z_b)`` (normalised) per row."""
    logw = []
    for _ in range(k):
        z = mean + std * torch.randn(mean.shape, generator=generator, dtype=mean.dtype)
        logw.append(log_joint(z) - gaussian_log_density(z, mean, std))
    w = torch.stack(logw)
    return torch.logsumexp(w, 0) - math.log(k)


def write_sentences(ids: torch.Tensor, data_cfg, path: Path) -> list[str]:
    """Decode token ids with the dataset's vocabulary and write one sentence per line."""
    from shortrun.data.ptb import decode, load_ptb

    vocab = load_ptb(data_cfg).extras["vocab"]
    sentences = decode(ids.cpu(), vocab)
    Path(path).write_text("\n".join(sentences) + "\n", encoding="utf-8")
    return sentences


def _language_model(lm_run: str | None, info, metric: str):
    from shortrun.errors import ConfigError
    from shortrun.run import load_run

    how = ("train one with `shortrun train lstm_lm_ptb --out LM_DIR`, then pass "
           "`--set model.lm_run=LM_DIR` to `shortrun eval`")
    if not lm_run:
        raise ConfigError(f"--metrics {metric}: needs model.lm_run, the run directory of an "
                          f"LSTM language model trained on real PTB; {how}")
    if not Path(lm_run).is_dir():
        raise ConfigError(f"model.lm_run: {lm_run!r} is not a directory; {how}")
    lm = load_run(Path(lm_run))
    if lm.cfg.model.name != "lstm_lm" or lm.model.info.to_dict() != info.to_dict():
        raise ConfigError(f"model.lm_run: {lm_run!r} is not an lstm_lm run on the same text "
                          f"data (vocabulary and length must match); {how}")
    return lm


def generated_perplexities(model, wanted: list[str], data, run_dir: Path,
                           cfg) -> dict[str, float]:
    """``fppl`` and/or ``rppl`` of ``eval.n_samples`` sentences sampled from ``model``.

    FPPL: the real-data LM at ``model.lm_run`` scores the samples. RPPL: an LM with that run's
    config, trained by the one Trainer on the samples for ``model.rppl_steps`` steps (in
    ``RUN/rppl_lm``), scores the real test split. The samples go to ``RUN/eval_samples.txt``.
    """
    import shutil

    from shortrun.data.base import LoadedData
    from shortrun.train.rundir import read_config
    from shortrun.train.trainer import Trainer

    lm = _language_model(cfg.model.lm_run, model.info, wanted[0])
    gen = torch.Generator().manual_seed(cfg.eval.seed)
    chunks = []
    for i in range(0, cfg.eval.n_samples, cfg.eval.batch_size):
        chunks.append(model.sample(min(cfg.eval.batch_size, cfg.eval.n_samples - i),
                                   generator=gen).cpu())
    samples = torch.cat(chunks)
    write_sentences(samples, cfg.data, run_dir / "eval_samples.txt")
    out: dict[str, float] = {}
    if "fppl" in wanted:
        out["fppl"] = perplexity(lm.model.log_prob, samples, cfg.eval.batch_size)
    if "rppl" in wanted:
        steps = cfg.model.rppl_steps
        lm_cfg = read_config(Path(cfg.model.lm_run), [
            f"train.steps={steps}", "train.progress=false", f"train.sample_every={steps}",
            f"train.ckpt_every={steps}", f"train.log_every={min(100, steps)}"])
        rdir = run_dir / "rppl_lm"
        if rdir.exists():
            shutil.rmtree(rdir)  # an earlier eval's LM: RPPL is always retrained from scratch
        trainer = Trainer(lm_cfg, rdir, data=LoadedData(train=samples, info=model.info,
                                                        test=data.test))
        trainer.fit()
        trainer.close()
        trainer.model.eval()
        out["rppl"] = perplexity(trainer.model.log_prob, data.test, cfg.eval.batch_size)
    return out
