"""``shortrun eval`` for Dual-MCMC (Cui & Han, ICLR 2024): the two effects its teaching claims.

- ``mse``: per-pixel reconstruction MSE (model space) of the first ``eval.n_samples`` test
  images, through the inference net alone (``mse_inference``) and with the z-chain started
  there (``mse_chain``).
- ``fd``: ``fd_generator`` (the generator alone) and ``fd_revised`` (after the EBM's x-chain),
  the same ``z`` for both, against the test split (else train).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from shortrun.data.base import LoadedData
from shortrun.evaluation.chains import with_chains
from shortrun.evaluation.features import extractor_check, run_extractor
from shortrun.evaluation.plan import EvalContext, EvalSpec, Group
from shortrun.evaluation.provenance import frechet_provenance
from shortrun.evaluation.sampling import sample_in_chunks
from shortrun.metrics.features import fd_kid


def reference_images(data: LoadedData) -> torch.Tensor:
    return data.test if data.test is not None else data.train


def reconstruction_mses(model: Any, cfg: Any, data: LoadedData,
                        tick: Callable[[int], None] | None = None) -> dict[str, float]:
    n, bs = cfg.eval.n_samples, cfg.eval.batch_size
    x = reference_images(data)[:n]
    sq_inf = sq_chain = 0.0
    for i in range(0, len(x), bs):
        xb = x[i: i + bs].to(model.device)
        sq_inf += float(((model.reconstruct(xb, chain=False) - xb) ** 2).sum())
        sq_chain += float(((model.reconstruct(xb, chain=True) - xb) ** 2).sum())
        if tick is not None:
            tick(len(xb))
    return {"mse_inference": sq_inf / x.numel(), "mse_chain": sq_chain / x.numel(),
            "mse_n": len(x)}


def generator_and_revised_fd(model: Any, cfg: Any, data: LoadedData,
                             tick: Callable[[int], None] | None = None) -> dict[str, Any]:
    n, bs = cfg.eval.n_samples, cfg.eval.batch_size
    reference = reference_images(data)
    extractor = run_extractor(cfg)

    def draw(k: int) -> tuple[torch.Tensor, torch.Tensor]:
        x0 = model.sample_generator(k)
        return x0, model.revise_x(x0, cfg.sample.steps)

    generated, revised = sample_in_chunks(draw, n, bs, tick)
    ref_feats = extractor.features(reference, data.info, bs)
    out: dict[str, Any] = {}
    for key, xs in (("fd_generator", generated), ("fd_revised", revised)):
        out[key] = fd_kid(extractor, xs, reference, data.info, ("fd",), bs,
                          reference_features=ref_feats)["fd"]
    out.update(frechet_provenance(extractor, data, n, ref_feats, bs, cfg.eval.seed))
    out.update(fd_n=n, fd_n_ref=len(reference), fd_extractor=extractor.name)
    return out


def plan(ctx: EvalContext, metrics: list[str]) -> list[Group]:
    cfg, model, data = ctx.cfg, ctx.model, ctx.data
    groups = []
    if "mse" in metrics:
        def mse(done: dict) -> dict:
            total = min(cfg.eval.n_samples, len(reference_images(data)))
            with ctx.progress.task("reconstructing", total, "images") as tick:
                return reconstruction_mses(model, cfg, data, tick)

        groups.append(Group("mse", mse))
    if "fd" in metrics:
        def fd(done: dict) -> dict:
            with ctx.progress.task("sampling", cfg.eval.n_samples, "samples") as tick:
                return generator_and_revised_fd(model, cfg, data, tick)

        groups.append(Group("fd", fd, (extractor_check(cfg),)))
    return groups


SPEC = EvalSpec(("fd", "mse", "chains"), ("mse", "fd"), with_chains(plan))
