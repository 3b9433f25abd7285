"""Finding and loading FD/KID feature extractors, and FD/KID of a model's samples.

``load_extractor(spec)`` understands three kinds of spec:

- a run directory of a trained ``classifier`` run: its penultimate-layer features
  (FD-MNIST / FD-Fashion when the run is ``classifier_mnist`` / ``classifier_fashion``);
- ``mnist`` / ``fashion``: such a run found at ``$SHORTRUN_FEATURES/<name>``, else
  ``<data folder>/features/<name>``, else ``runs/features/<name>`` under the working directory;
- ``inception:PATH``: the FID Inception network (Heusel et al. 2017) with the
  ``pt_inception-2015-12-05`` weights file at PATH (see :mod:`shortrun.metrics.inception`).

The extractor itself and the FD/KID maths are pure and live in :mod:`shortrun.metrics.features`;
this module loads runs, so it sits on the evaluation floor.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shortrun.data.base import DATA_ENV, LoadedData
from shortrun.errors import ConfigError, DataError
from shortrun.evaluation.plan import EvalContext, Group
from shortrun.evaluation.provenance import frechet_provenance, reference_split
from shortrun.evaluation.sampling import sample_in_chunks
from shortrun.metrics.features import Extractor, fd_kid

FEATURES_ENV = "SHORTRUN_FEATURES"
NAMED = {"mnist": "classifier_mnist", "fashion": "classifier_fashion"}


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
    from shortrun.run import load_run

    run = load_run(Path(run_dir))
    model = run.model
    if not hasattr(model, "features"):
        raise ConfigError(f"{run_dir} holds a {run.cfg.model.name!r} run; a feature extractor "
                          "must be a `classifier` run (shortrun train classifier_mnist)")
    model.eval()
    return Extractor(name or str(run_dir), model.features, model.feature_dim, model.info,
                     channels=model.info.shape[0])


def default_extractor_spec(cfg: Any) -> str:
    """``eval.extractor`` if set, else the dataset's own classifier (``mnist``/``fashion``)."""
    if cfg.eval.extractor:
        return cfg.eval.extractor
    name = getattr(cfg.data, "name", "")
    if name in NAMED:
        return name
    raise ConfigError(f"fd/kid: no default feature extractor for dataset {name!r}; set "
                      "eval.extractor=RUN_DIR (a classifier run) or inception:PATH")


def run_extractor(cfg: Any) -> Extractor:
    """The extractor a run's FD/KID use (``eval.extractor`` or the dataset's default)."""
    return load_extractor(default_extractor_spec(cfg), getattr(cfg.data, "data_dir", None))


def extractor_check(cfg: Any) -> Callable[[], None]:
    """A check: the run's extractor loads. Loaded and dropped: it is loaded again where the
    metric needs it, so the random stream of the metric is the same as without the check."""

    def check() -> None:
        run_extractor(cfg)

    return check


def model_fd_kid(model: Any, data: LoadedData, cfg: Any, metrics: tuple[str, ...] = ("fd", "kid"),
                 tick: Callable[[int], None] | None = None) -> dict[str, float]:
    """Sample ``eval.n_samples`` from ``model`` and compare with the test split (else train);
    an FD comes with its provenance (:mod:`shortrun.evaluation.provenance`)."""
    extractor = run_extractor(cfg)
    n, bs = cfg.eval.n_samples, cfg.eval.batch_size
    generated = sample_in_chunks(model.sample, n, bs, tick)
    _, reference = reference_split(data)
    ref_feats = extractor.features(reference, data.info, bs)
    out = fd_kid(extractor, generated, reference, data.info, metrics, bs, cfg.eval.seed,
                 reference_features=ref_feats)
    if "fd" in metrics:
        out.update(frechet_provenance(extractor, data, len(generated), ref_feats, bs,
                                      cfg.eval.seed))
    return out


def sampled_fd_kid_group(ctx: EvalContext, metrics: list[str]) -> Group:
    """The usual image group: FD and/or KID of ``eval.n_samples`` model samples."""

    def compute(done: dict) -> dict:
        with ctx.progress.task("sampling", ctx.cfg.eval.n_samples, "samples") as tick:
            return model_fd_kid(ctx.model, ctx.data, ctx.cfg, tuple(metrics), tick)

    return Group("/".join(metrics), compute, (extractor_check(ctx.cfg),))

