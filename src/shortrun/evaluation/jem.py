"""``shortrun eval`` for JEM runs: accuracy, calibration, out-of-distribution detection and the
quality of class-conditional samples (the evaluation of Grathwohl et al. 2020, §5-6).

- ``accuracy``: test accuracy of ``argmax p(y|x)``.
- ``ece``: expected calibration error over 15 confidence bins (Guo et al. 2017), with the
  reliability table (``reliability``) that ``shortrun report`` draws.
- ``ood_auroc``: AUROC of telling the test split of the run's dataset from the other
  MNIST-like one's (MNIST ↔ Fashion-MNIST), scored by ``log p(x) = −E(x) − log Z`` (the JEM
  score, paper Table 3) and by the max-softmax baseline ``max_y p(y|x)`` (Hendrycks & Gimpel
  2017); the in-distribution images are the positives.
- ``fd``: FD of ``eval.n_samples`` class-conditional samples (classes in turn) against the test
  split with the dataset's feature classifier (``eval.extractor``, default
  ``classifier_mnist`` / ``classifier_fashion``), and ``sample_accuracy``: the fraction of them
  that classifier assigns to the class they were drawn for.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from shortrun.data.base import LoadedData
from shortrun.errors import ConfigError
from shortrun.evaluation.classifier import accuracy
from shortrun.evaluation.features import extractor_check, run_extractor
from shortrun.evaluation.plan import EvalContext, EvalSpec, Group, needs_test_split
from shortrun.evaluation.provenance import reference_split
from shortrun.evaluation.sampling import sample_in_chunks
from shortrun.metrics.anomaly import auroc
from shortrun.metrics.calibration import reliability
from shortrun.metrics.features import fd_kid

#: the out-of-distribution test set of each MNIST-like dataset
OOD_PAIRS = {"mnist": "fashion", "fashion": "mnist"}
ECE_BINS = 15


@torch.no_grad()
def logits_of(model: Any, x: torch.Tensor, batch_size: int) -> torch.Tensor:
    return torch.cat([model(x[i: i + batch_size].to(model.device)).float().cpu()
                      for i in range(0, len(x), batch_size)])


def calibration(model: Any, data: LoadedData, batch_size: int) -> dict[str, Any]:
    probs = F.softmax(logits_of(model, data.test, batch_size), dim=1)
    rel = reliability(probs, data.test_labels, ECE_BINS)
    return {"ece": rel.ece, "ece_bins": ECE_BINS,
            "reliability": {"confidence": rel.confidence, "accuracy": rel.accuracy,
                            "count": rel.count}}


def ood_scores(model: Any, x: torch.Tensor, batch_size: int) -> tuple[torch.Tensor,
                                                                       torch.Tensor]:
    """``(log p(x) + log Z, max_y p(y|x))`` of every row: higher means in-distribution."""
    logits = logits_of(model, x, batch_size)
    return torch.logsumexp(logits, 1), F.softmax(logits, 1).max(1).values


def ood_data(cfg: Any) -> LoadedData:
    from shortrun.data.registry import load_data

    other = OOD_PAIRS[cfg.data.name]
    return load_data(type(cfg.data)(name=other, scale=getattr(cfg.data, "scale", "symmetric"),
                                    data_dir=getattr(cfg.data, "data_dir", None)))


def ood_auroc(model: Any, cfg: Any, data: LoadedData) -> dict[str, Any]:
    out_x = ood_data(cfg).test
    bs = cfg.eval.batch_size
    in_logpx, in_msp = ood_scores(model, data.test, bs)
    out_logpx, out_msp = ood_scores(model, out_x, bs)
    labels = torch.cat([torch.ones(len(in_logpx)), torch.zeros(len(out_logpx))])
    return {"ood_dataset": OOD_PAIRS[cfg.data.name],
            "ood_auroc_logpx": auroc(torch.cat([in_logpx, out_logpx]).numpy(), labels.numpy()),
            "ood_auroc_maxsoftmax": auroc(torch.cat([in_msp, out_msp]).numpy(),
                                          labels.numpy()),
            "ood_n_in": len(in_logpx), "ood_n_out": len(out_logpx)}


def conditional_fd(model: Any, cfg: Any, data: LoadedData, tick: Any = None) -> dict[str, Any]:
    extractor = run_extractor(cfg)
    n, bs = cfg.eval.n_samples, cfg.eval.batch_size
    labels = torch.arange(n) % model.options.n_classes
    done = [0]

    def draw(k: int) -> torch.Tensor:
        y = labels[done[0]: done[0] + k]
        done[0] += k
        return model.sample(k, y=y)

    generated = sample_in_chunks(draw, n, bs, tick)
    _, reference = reference_split(data)
    out: dict[str, Any] = fd_kid(extractor, generated, reference, data.info, ("fd",), bs,
                                 cfg.eval.seed)
    out["fd_extractor_sha256"] = extractor.weights_sha256
    judge = getattr(extractor.net, "__self__", None)  # the feature classifier, if it is one
    if judge is not None and hasattr(judge, "head"):
        with torch.no_grad():
            pred = torch.cat([judge(extractor.to_input_space(generated[i: i + bs], data.info))
                              .argmax(1) for i in range(0, n, bs)])
        out["sample_accuracy"] = float((pred.cpu() == labels).float().mean())
    return out


def plan(ctx: EvalContext, metrics: list[str]) -> list[Group]:
    labelled = needs_test_split(ctx.data, "this metric needs a labelled test split", labels=True)
    bs = ctx.batch_size
    groups = []
    if "accuracy" in metrics:
        groups.append(Group("accuracy", lambda done: accuracy(ctx.model, ctx.data, bs),
                            (labelled,)))
    if "ece" in metrics:
        groups.append(Group("ece", lambda done: calibration(ctx.model, ctx.data, bs),
                            (labelled,)))
    if "ood_auroc" in metrics:
        def paired() -> None:
            if ctx.cfg.data.name not in OOD_PAIRS:
                raise ConfigError(f"ood_auroc: defined for runs on {' or '.join(OOD_PAIRS)} "
                                  f"(each against the other); this run is on "
                                  f"{ctx.cfg.data.name!r}")

        groups.append(Group("ood_auroc", lambda done: ood_auroc(ctx.model, ctx.cfg, ctx.data),
                            (paired, needs_test_split(ctx.data, "ood_auroc needs a test split"))))
    if "fd" in metrics:
        def compute(done: dict) -> dict:
            with ctx.progress.task("sampling", ctx.cfg.eval.n_samples, "samples") as tick:
                return conditional_fd(ctx.model, ctx.cfg, ctx.data, tick)

        groups.append(Group("fd", compute, (extractor_check(ctx.cfg),)))
    return groups


SPEC = EvalSpec(("accuracy", "ece", "ood_auroc", "fd"), ("accuracy", "ece"), plan)
