"""``shortrun eval`` for the text models: NLL of the text LEBM, FPPL / RPPL of its samples, and
the language model's own test perplexity.

- ``nll`` (``lebm_text``): ``−log p(x)`` per test sentence by the latent models' one AIS
  estimator (:mod:`shortrun.estimators.latent`; :meth:`LEBMText.log_px`, the earlier
  importance-sampled estimate, stays as a cross-check); ``nll_ppl = exp(Σ NLL / Σ tokens)``.
- ``fppl`` / ``rppl`` (Zhao et al. 2018 §6, the LEBM paper's Table 3): ``eval.n_samples``
  sampled sentences scored by the real-data LM at ``model.lm_run`` (forward), and a fresh LM
  with that run's config trained by the one Trainer on the samples, scored on the real test
  split (reverse). The samples go to ``RUN/eval_samples.txt``; the reverse LM to
  ``RUN/rppl_lm``.
- ``ppl`` (``lstm_lm``): test perplexity.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from shortrun.data.base import LoadedData
from shortrun.data.ptb import lengths, trim
from shortrun.errors import ConfigError
from shortrun.evaluation.plan import EvalContext, EvalSpec, Group, needs_test_split
from shortrun.evaluation.sampling import sample_in_chunks
from shortrun.metrics.text import perplexity, write_sentences

TEXT_BETAS = 100  # AIS distributions per chain for ``nll`` (the LSTM's gradient is the cost)
LM_HOW = ("train one with `shortrun train lstm_lm_ptb --out LM_DIR`, then pass "
          "`--set model.lm_run=LM_DIR` to `shortrun eval`")


def text_nll(model: Any, cfg: Any, test: torch.Tensor,
             tick: Callable[[int], None] | None = None, n_betas: int = TEXT_BETAS,
             ) -> dict[str, float]:
    """``nll``, ``nll_se``, ``nll_ppl``, ``nll_log_z`` (with ``nll_log_z_se``) and
    ``nll_sentences`` over the test sentences (the first ``model.nll_sentences`` when set).

    ``−log p(x)`` by the estimator every latent model uses
    (:func:`shortrun.estimators.latent.latent_log_likelihood`): ``model.nll_chains`` AIS runs
    per sentence from the prior's Gaussian reference to the posterior over ``n_betas``
    distributions, ``log Z(α)`` from ``model.log_z_samples`` Monte-Carlo draws. Forward AIS is
    a stochastic lower bound on ``log p(x)``, so ``nll`` is an upper bound up to its error."""
    from shortrun.estimators.annealing import AISSettings
    from shortrun.estimators.latent import latent_log_likelihood, prior_log_partition
    from shortrun.evaluation.likelihood import latent_model_of

    m = cfg.model
    x = test[: m.nll_sentences] if m.nll_sentences else test
    lm = latent_model_of(model)
    lz = prior_log_partition(lm, m.log_z_samples)
    settings = AISSettings(n_betas=n_betas, step_size=m.post_step_size)
    bs = max(1, cfg.eval.batch_size // m.nll_chains)  # each sentence runs nll_chains chains
    total, tokens, var = 0.0, 0, 0.0
    for i in range(0, x.shape[0], bs):
        b = trim(x[i: i + bs])
        est = latent_log_likelihood(lm, b, m.nll_chains, settings, log_z_prior=lz)
        total -= float(est.log_px.sum())
        var += float(est.stderr.pow(2).sum())
        tokens += int((lengths(b) - 1).sum())
        if tick is not None:
            tick(len(b))
    n = x.shape[0]
    return {"nll": total / n, "nll_se": math.sqrt(var / n ** 2 + lz.stderr ** 2),
            "nll_ppl": math.exp(total / tokens), "nll_log_z": lz.log_z,
            "nll_log_z_se": lz.stderr, "nll_sentences": float(n)}


def language_model(lm_run: str | None, info: Any, metric: str) -> Any:
    """The ``lstm_lm`` run at ``lm_run``, checked to be on the same text data."""
    from shortrun.run import load_run

    if not lm_run:
        raise ConfigError(f"--metrics {metric}: needs model.lm_run, the run directory of an "
                          f"LSTM language model trained on real PTB; {LM_HOW}")
    if not Path(lm_run).is_dir():
        raise ConfigError(f"model.lm_run: {lm_run!r} is not a directory; {LM_HOW}")
    lm = load_run(Path(lm_run))
    if lm.cfg.model.name != "lstm_lm" or lm.model.info.to_dict() != info.to_dict():
        raise ConfigError(f"model.lm_run: {lm_run!r} is not an lstm_lm run on the same text "
                          f"data (vocabulary and length must match); {LM_HOW}")
    return lm


def generated_perplexities(model: Any, cfg: Any, wanted: list[str], data: LoadedData,
                           run_dir: Path, tick: Callable[[int], None] | None = None,
                           ) -> dict[str, float]:
    """``fppl`` and/or ``rppl`` of ``eval.n_samples`` sentences sampled from ``model``."""
    from shortrun.train.rundir import read_config
    from shortrun.train.trainer import Trainer

    lm = language_model(cfg.model.lm_run, model.info, wanted[0])
    gen = torch.Generator().manual_seed(cfg.eval.seed)
    samples = sample_in_chunks(lambda k: model.sample(k, generator=gen), cfg.eval.n_samples,
                               cfg.eval.batch_size, tick)
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


def plan_lebm_text(ctx: EvalContext, metrics: list[str]) -> list[Group]:
    cfg, model, data = ctx.cfg, ctx.model, ctx.data
    has_test = needs_test_split(data, "lebm_text eval needs a test split (data.name=ptb)")
    groups = []
    if "nll" in metrics:
        def nll(done: dict) -> dict:
            with ctx.progress.task("sentences", len(data.test), "sentences") as tick:
                return text_nll(model, cfg, data.test, tick)

        groups.append(Group("nll", nll, (has_test,)))
    wanted = [k for k in ("fppl", "rppl") if k in metrics]
    if wanted:
        def perplexities(done: dict) -> dict:
            with ctx.progress.task("sampling", cfg.eval.n_samples, "sentences") as tick:
                return generated_perplexities(model, cfg, wanted, data, Path(ctx.run_dir), tick)

        def lm_ready() -> None:
            language_model(cfg.model.lm_run, model.info, wanted[0])
            if ctx.run_dir is None:
                raise ConfigError(f"--metrics {wanted[0]}: needs a run directory for "
                                  "eval_samples.txt and the reverse LM; pass run_dir")

        groups.append(Group("/".join(wanted), perplexities, (has_test, lm_ready)))
    return groups


def plan_lstm_lm(ctx: EvalContext, metrics: list[str]) -> list[Group]:
    def ppl(done: dict) -> dict:
        return {"ppl": perplexity(ctx.model.log_prob, ctx.data.test, ctx.batch_size)}

    return [Group("ppl", ppl, (needs_test_split(
        ctx.data, "--metrics ppl: the dataset has no test split"),))]


LEBM_TEXT = EvalSpec(("nll", "fppl", "rppl"), ("nll",), plan_lebm_text)
LSTM_LM = EvalSpec(("ppl",), ("ppl",), plan_lstm_lm)
