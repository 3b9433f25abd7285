"""JEM's evaluation: ECE and the OOD AUROCs read the right way round, on constructed models."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from shortrun.data.base import DataInfo, LoadedData
from shortrun.evaluation import jem as jem_eval
from shortrun.evaluation.registry import eval_spec

INFO = DataInfo(shape=(1, 4, 4), kind="image", low=-1.0, high=1.0)


class MeanLogits(torch.nn.Module):
    """Logits ``[k·mean(x), 0, …, 0]``: log p(x) and max p(y|x) both grow with ``k·mean(x)``."""

    def __init__(self, k: float) -> None:
        super().__init__()
        self.k = k
        self.device = torch.device("cpu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(len(x), 10)
        out[:, 0] = self.k * x.flatten(1).mean(1)
        return out


def cfg_for(name: str) -> SimpleNamespace:
    return SimpleNamespace(data=SimpleNamespace(name=name), eval=SimpleNamespace(batch_size=7))


def test_ood_auroc_scores_in_distribution_images_as_the_positives(monkeypatch):
    g = torch.Generator().manual_seed(0)
    inside = LoadedData(train=torch.zeros(1, 1, 4, 4), info=INFO,
                        test=0.5 + 0.1 * torch.rand(30, 1, 4, 4, generator=g))
    outside = LoadedData(train=torch.zeros(1, 1, 4, 4), info=INFO,
                         test=-0.5 - 0.1 * torch.rand(20, 1, 4, 4, generator=g))
    monkeypatch.setattr(jem_eval, "ood_data", lambda cfg: outside)
    good = jem_eval.ood_auroc(MeanLogits(10.0), cfg_for("mnist"), inside)
    assert good["ood_dataset"] == "fashion" and (good["ood_n_in"], good["ood_n_out"]) == (30, 20)
    assert good["ood_auroc_logpx"] == 1.0 and good["ood_auroc_maxsoftmax"] == 1.0
    bad = jem_eval.ood_auroc(MeanLogits(-10.0), cfg_for("fashion"), inside)
    assert bad["ood_dataset"] == "mnist" and bad["ood_auroc_logpx"] == 0.0


def test_calibration_writes_ece_and_the_reliability_table():
    x = torch.cat([torch.full((5, 1, 4, 4), 0.3), torch.full((5, 1, 4, 4), -0.3)])
    data = LoadedData(train=x, info=INFO, test=x, test_labels=torch.zeros(10, dtype=torch.long))
    out = jem_eval.calibration(MeanLogits(10.0), data, batch_size=4)
    probs = torch.softmax(MeanLogits(10.0)(x), 1)
    conf, pred = probs.max(1)
    want = (conf - (pred == 0).double()).abs().mean()  # each half shares one bin
    assert out["ece"] == pytest.approx(float(want), rel=1e-5)
    assert sum(out["reliability"]["count"]) == 10 and out["ece_bins"] == 15


def test_jem_metrics_are_registered():
    assert eval_spec("jem").metrics == ("accuracy", "ece", "ood_auroc", "fd")


class Judge(torch.nn.Module):
    """A stand-in feature classifier: class k for images of value k/2 − 1/2."""

    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Identity()

    def features(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.flatten(1)
        return torch.stack([flat.mean(1), flat[:, 0]], 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centres = torch.tensor([-0.5, 0.0, 0.5])
        return -(x.flatten(1).mean(1, keepdim=True) - centres) ** 2


class ClassImages:
    """A stand-in JEM whose sample(k, y) is an image of value y/2 − 1/2 (plus noise)."""

    options = SimpleNamespace(n_classes=3)

    def __init__(self, wrong: bool = False) -> None:
        self.wrong = wrong

    def sample(self, k: int, y: torch.Tensor) -> torch.Tensor:
        y = (y + 1) % 3 if self.wrong else y
        return (y.float() / 2 - 0.5).view(-1, 1, 1, 1) + 0.01 * torch.randn(k, 1, 4, 4)


def test_sample_accuracy_is_the_share_classified_as_the_class_asked_for(monkeypatch):
    from shortrun.metrics.features import Extractor

    judge = Judge()
    monkeypatch.setattr(jem_eval, "run_extractor",
                        lambda cfg: Extractor("judge", judge.features, 2, INFO))
    cfg = SimpleNamespace(eval=SimpleNamespace(n_samples=30, batch_size=8, seed=0))
    data = LoadedData(train=torch.zeros(1, 1, 4, 4), info=INFO,
                      test=torch.rand(40, 1, 4, 4) - 0.5)
    torch.manual_seed(0)
    out = jem_eval.conditional_fd(ClassImages(), cfg, data)
    assert out["sample_accuracy"] == 1.0 and out["fd_n"] == 30 and out["fd"] > 0
    assert jem_eval.conditional_fd(ClassImages(wrong=True), cfg, data)["sample_accuracy"] == 0.0
