"""A small CNN classifier whose penultimate features define FD-MNIST / FD-Fashion.

The Fréchet distance needs a fixed feature map (Heusel et al. 2017 use Inception-v3's pool
features); for 28×28 data a classifier trained on the same dataset is the standard offline
substitute (e.g. the "FID on MNIST with a LeNet" of many EBM/VAE papers). It is trained by the
same Trainer as every other model — recipes ``classifier_mnist`` and ``classifier_fashion`` —
and used by :func:`shortrun.metrics.features.load_extractor`. It is supervised, so it asks the
Trainer for ``(images, labels)`` batches (``Model.supervised``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from shortrun.data.base import DataInfo, LoadedData
from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.base import Model, ModelOptions
from shortrun.models.inputs import check_sample_args


@dataclass
class ClassifierOptions(ModelOptions):
    width: int = fld(32, gt=0, doc="channels of the first conv block (the second has 2×)")
    feature_dim: int = fld(128, gt=0, doc="size of the penultimate (feature) layer")
    n_classes: int = fld(10, gt=1)
    dropout: float = fld(0.3, ge=0.0, lt=1.0)


def _block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                         nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
                         nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
                         nn.BatchNorm2d(c_out), nn.ReLU(inplace=True), nn.MaxPool2d(2))


class Classifier(Model):
    Config = ClassifierOptions
    supervised = True

    def __init__(self, options: ClassifierOptions | None = None,
                 info: DataInfo | None = None) -> None:
        super().__init__(options, info)
        self._finish_init()

    def setup(self, info: DataInfo) -> None:
        m: ClassifierOptions = self.options
        if info.kind not in ("image", "binary") or len(info.shape) != 3:
            raise ConfigError(f"model classifier needs image data (C, H, W); this data has "
                              f"shape {info.shape}")
        c, h, w = info.shape
        self.body = nn.Sequential(_block(c, m.width), _block(m.width, 2 * m.width), nn.Flatten(),
                                  nn.Linear(2 * m.width * (h // 4) * (w // 4), m.feature_dim),
                                  nn.BatchNorm1d(m.feature_dim), nn.ReLU(inplace=True))
        self.head = nn.Sequential(nn.Dropout(m.dropout), nn.Linear(m.feature_dim, m.n_classes))
        self.feature_dim = m.feature_dim

    def on_train_start(self, data: LoadedData) -> None:
        if data.train_labels is None:
            raise ConfigError("model classifier needs labels; this dataset has none")

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Penultimate-layer activations ``(B, feature_dim)``: the FD/KID feature map."""
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))

    def training_step(self, batch, step, optimizers):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.optimizer_step(optimizers["main"], loss)
        accuracy = (logits.detach().argmax(1) == y).float().mean()
        return {"loss": float(loss.detach()), "accuracy": float(accuracy)}

    def sample(self, n, steps=None, generator=None):
        check_sample_args(n, steps, generator)
        raise ConfigError("model classifier is a feature extractor, not a generative model; "
                          "it has no samples")

    def draw(self, path: Path, n: int) -> None:
        """Nothing to draw: a classifier has no samples."""
