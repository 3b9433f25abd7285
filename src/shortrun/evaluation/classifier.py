"""``shortrun eval`` for the FD feature extractors: test accuracy, and the FD/KID floor.

``fd_floor`` / ``kid_floor``: FD and KID of ``eval.n_samples`` random training images against
the whole test split, with this classifier's features — what a perfect generator would score at
that n (the reference floor recorded in docs/evaluation.md).
"""

from __future__ import annotations

from typing import Any

import torch

from shortrun.data.base import LoadedData
from shortrun.evaluation.plan import EvalContext, EvalSpec, Group, needs_test_split
from shortrun.metrics.features import Extractor, fd_kid


@torch.no_grad()
def accuracy(model: Any, data: LoadedData, batch_size: int) -> dict[str, float]:
    correct = sum(int((model(data.test[i: i + batch_size]).argmax(1)
                       == data.test_labels[i: i + batch_size]).sum())
                  for i in range(0, len(data.test), batch_size))
    return {"accuracy": correct / len(data.test), "accuracy_n": len(data.test)}


@torch.no_grad()
def floors(model: Any, cfg: Any, data: LoadedData, wanted: tuple[str, ...]) -> dict[str, float]:
    # Same shape as a model's fd/kid (model_fd_kid): n "generated" images against the whole
    # test split, with the n images drawn at random from the training split (MNIST's test
    # split is ordered: its first half is the easier writers).
    n = min(cfg.eval.n_samples, len(data.train))
    g = torch.Generator().manual_seed(cfg.eval.seed)
    pick = torch.randperm(len(data.train), generator=g)[:n]
    extractor = Extractor("self", model.features, model.feature_dim, model.info)
    floor = fd_kid(extractor, data.train[pick], data.test, None, wanted, cfg.eval.batch_size,
                   cfg.eval.seed)
    out = {f"{k.split('_')[0]}_floor{k[len(k.split('_')[0]):]}": v for k, v in floor.items()}
    # provenance: the weights these floors belong to, and what they compared
    out.update(floor_extractor_sha256=extractor.weights_sha256, floor_reference="test",
               floor_real="train")
    return out


def plan(ctx: EvalContext, metrics: list[str]) -> list[Group]:
    labelled = needs_test_split(ctx.data, "accuracy needs a labelled test split", labels=True)
    groups = []
    if "accuracy" in metrics:
        groups.append(Group("accuracy", lambda done: accuracy(ctx.model, ctx.data,
                                                              ctx.batch_size), (labelled,)))
    wanted = tuple(m.removesuffix("_floor") for m in metrics if m.endswith("_floor"))
    if wanted:
        groups.append(Group("/".join(f"{w}_floor" for w in wanted),
                            lambda done: floors(ctx.model, ctx.cfg, ctx.data, wanted),
                            (labelled,)))
    return groups


SPEC = EvalSpec(("accuracy", "fd_floor", "kid_floor"), ("accuracy",), plan)
