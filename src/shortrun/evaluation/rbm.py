"""``shortrun eval`` for the RBMs: real log-likelihoods, with ``log Z`` exact where the smaller
layer can be enumerated and AIS (Salakhutdinov & Murray 2008) otherwise."""

from __future__ import annotations

from typing import Any

import torch

from shortrun.data.base import LoadedData
from shortrun.evaluation.chains import with_chains
from shortrun.evaluation.plan import EvalContext, EvalSpec, Group


def log_likelihoods(model: Any, cfg: Any, data: LoadedData) -> dict[str, Any]:
    """``log_z`` (with its method and standard error), ``loglik_train`` and ``loglik_test``
    in nats per example."""
    gen = torch.Generator().manual_seed(cfg.eval.seed)
    log_z, method, stderr = model.log_z(data.train, gen)
    out = {"log_z": log_z, "log_z_method": method, "log_z_stderr": stderr,
           "loglik_train": model.mean_log_likelihood(data.train, log_z)}
    if data.test is not None:
        out["loglik_test"] = model.mean_log_likelihood(data.test, log_z)
    return out


def plan(ctx: EvalContext, metrics: list[str]) -> list[Group]:
    return [Group("loglik", lambda done: log_likelihoods(ctx.model, ctx.cfg, ctx.data))]


SPEC = EvalSpec(("loglik", "chains"), ("loglik",), with_chains(plan))
