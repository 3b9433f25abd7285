"""Feature extractors for the Fréchet distance and KID, loaded offline.

``load_extractor(spec)`` understands three kinds of spec:

- a run directory of a trained ``classifier`` run: its penultimate-layer features
  (FD-MNIST / FD-Fashion when the run is ``classifier_mnist`` / ``classifier_fashion``);
- ``mnist`` / ``fashion``: such a run found at ``$SHORTRUN_FEATURES/<name>``, else
  ``<data folder>/features/<name>``, else ``runs/features/<name>`` under the working directory;
- ``inception:PATH``: the FID Inception network (Heusel et al. 2017) with the
  ``pt_inception-2015-12-05`` weights file at PATH (see :mod:`shortrun.metrics.inception`).

An extractor maps image batches in *model space* ``(B, C, H, W)`` to ``(B, D)`` float features.
Pass the :class:`DataInfo` of the space the images live in and the extractor maps its
``[low, high]`` range onto its own input range, so a ``[0, 1]`` or binary model can be measured
with a classifier trained on ``[-1, 1]`` images.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from shortrun.data.base import DATA_ENV, DataInfo
from shortrun.errors import DataError

FEATURES_ENV = "SHORTRUN_FEATURES"
NAMED = {"mnist": "classifier_mnist", "fashion": "classifier_fashion"}


class Extractor:
    """A frozen network used as a feature map; call it on a batch, or :meth:`features`."""

    def __init__(self, name: str, net: Callable[[torch.Tensor], torch.Tensor], dim: int,
                 info: DataInfo, channels: int | None = None) -> None:
        self.name, self.net, self.dim, self.info = name, net, dim, info
        self.channels = channels

    def to_input_space(self, x: torch.Tensor, info: DataInfo | None) -> torch.Tensor:
        x = x.float()
        if x.dim() == 2:  # flattened square images
            side = int(round(x.shape[1] ** 0.5))
            x = x.reshape(-1, 1, side, side)
        if info is not None and (info.low, info.high) != (self.info.low, self.info.high):
            # Range to range: [low, high] of the caller's space onto the extractor's
            # (binary {0, 1} data counts as the range [0, 1]).
            unit = (x.clamp(info.low, info.high) - info.low) / (info.high - info.low)
            x = self.info.low + unit * (self.info.high - self.info.low)
        return x

    @torch.no_grad()
    def __call__(self, x: torch.Tensor, info: DataInfo | None = None) -> torch.Tensor:
        return self.net(self.to_input_space(x, info)).float()

    @torch.no_grad()
    def features(self, x: torch.Tensor, info: DataInfo | None = None,
                 batch_size: int = 500) -> np.ndarray:
        """Features of a whole set, in batches, as float64 numpy ``(n, D)``."""
        parts = [self(x[i : i + batch_size], info).double().cpu().numpy()
                 for i in range(0, len(x), batch_size)]
        return np.concatenate(parts) if parts else np.zeros((0, self.dim))


def _named_candidates(name: str, data_dir: str | None) -> list[Path]:
    out = []
    if os.environ.get(FEATURES_ENV):
        out.append(Path(os.environ[FEATURES_ENV]).expanduser() / name)
    root = data_dir or os.environ.get(DATA_ENV)
    if root:
        out.append(Path(root).expanduser() / "features" / name)
    out.append(Path("runs") / "features" / name)
    return out


def load_extractor(spec: str, data_dir: str | None = None) -> Extractor:
    """Resolve ``spec`` (run dir, ``mnist``/``fashion``, or ``inception:PATH``) to an
    :class:`Extractor`; a missing one is a one-line :class:`DataError` saying how to get it."""
    spec = str(spec).strip()
    if spec.startswith("inception:"):
        from shortrun.metrics.inception import load_inception_extractor

        return load_inception_extractor(spec.split(":", 1)[1])
    if spec in NAMED:
        for path in _named_candidates(spec, data_dir):
            if (path / "config.yaml").is_file():
                return classifier_extractor(path, name=spec)
        recipe = NAMED[spec]
        raise DataError(
            f"feature extractor {spec!r} not found (looked in $SHORTRUN_FEATURES/{spec}, "
            f"<data folder>/features/{spec}, runs/features/{spec}); train it once with "
            f"`shortrun train {recipe} --out runs/features/{spec}` (a few CPU minutes) or set "
            f"eval.extractor=RUN_DIR")
    path = Path(spec).expanduser()
    if (path / "config.yaml").is_file():
        return classifier_extractor(path)
    raise DataError(
        f"feature extractor {spec!r}: not a classifier run directory, not a known name "
        f"({', '.join(NAMED)}), not inception:PATH; train one with `shortrun train "
        f"classifier_mnist --out DIR` and pass DIR, or give inception:PATH to the "
        f"pt_inception-2015-12-05-6726825d.pth file")


def classifier_extractor(run_dir: Path, name: str | None = None) -> Extractor:
    """Penultimate features of a trained ``classifier`` run."""
    from shortrun.errors import ConfigError
    from shortrun.run import load_run

    run = load_run(Path(run_dir))
    model = run.model
    if not hasattr(model, "features"):
        raise ConfigError(f"{run_dir} holds a {run.cfg.model.name!r} run; a feature extractor "
                          "must be a `classifier` run (shortrun train classifier_mnist)")
    model.eval()
    return Extractor(name or str(run_dir), model.features, model.feature_dim, model.info,
                     channels=model.info.shape[0])


def fd_kid(extractor: Extractor, generated: torch.Tensor, reference: torch.Tensor,
           info: DataInfo | None = None, metrics: tuple[str, ...] = ("fd", "kid"),
           batch_size: int = 500, seed: int = 0, kid_subsets: int = 100) -> dict[str, float]:
    """FD and/or KID between ``generated`` and ``reference`` images (model space of ``info``).

    Keys: ``fd`` with ``fd_n`` / ``fd_n_ref`` (sample sizes, always beside the value) and
    ``kid`` with ``kid_std`` / ``kid_n``."""
    from shortrun.metrics.frechet import frechet_distance_from_stats, frechet_stats
    from shortrun.metrics.kid import kid

    fa = extractor.features(generated, info, batch_size)
    fb = extractor.features(reference, info, batch_size)
    out: dict[str, float] = {}
    if "fd" in metrics:
        sa, sb = frechet_stats(fa), frechet_stats(fb)
        out.update(fd=frechet_distance_from_stats(sa, sb), fd_n=sa.n, fd_n_ref=sb.n)
    if "kid" in metrics:
        mean, std = kid(fa, fb, n_subsets=kid_subsets, subset_size=1000, seed=seed)
        out.update(kid=mean, kid_std=std, kid_n=min(len(fa), len(fb)))
    return out


def default_extractor_spec(cfg) -> str:
    """``eval.extractor`` if set, else the dataset's own classifier (``mnist``/``fashion``)."""
    from shortrun.errors import ConfigError

    if cfg.eval.extractor:
        return cfg.eval.extractor
    name = getattr(cfg.data, "name", "")
    if name in NAMED:
        return name
    raise ConfigError(f"fd/kid: no default feature extractor for dataset {name!r}; set "
                      "eval.extractor=RUN_DIR (a classifier run) or inception:PATH")


def model_fd_kid(model, data, cfg, metrics: tuple[str, ...] = ("fd", "kid")) -> dict[str, float]:
    """Sample ``eval.n_samples`` from ``model`` and compare with the test split (else train).

    What a model's ``evaluate`` calls for ``fd``/``kid``. Not under ``no_grad``: samplers
    need gradients with respect to the chain state."""
    extractor = load_extractor(default_extractor_spec(cfg), getattr(cfg.data, "data_dir", None))
    n, bs = cfg.eval.n_samples, cfg.eval.batch_size
    generated = torch.cat([model.sample(min(bs, n - i)).detach().cpu() for i in range(0, n, bs)])
    reference = data.test if data.test is not None else data.train
    out = fd_kid(extractor, generated, reference, data.info, metrics, bs, cfg.eval.seed)
    return out
