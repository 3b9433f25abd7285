"""``shortrun eval`` for the data-space EBM and the score-matching models.

2-D data: ``kl_grid`` (grid-normalised KL(data‖model), Gaussian mixtures only),
``loglik_grid`` and a sample ``mmd`` against the test split, plus a picture of the density
heat map beside samples over the data (``RUN_DIR/density.png``). Images: ``fd`` / ``kid``
(:mod:`shortrun.evaluation.features`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shortrun.data.toy2d import toy_density
from shortrun.errors import ConfigError
from shortrun.estimators.grid import grid_metrics, plot_half_width, save_density_and_samples
from shortrun.evaluation.chains import with_chains
from shortrun.evaluation.features import sampled_fd_kid_group
from shortrun.evaluation.plan import EvalContext, EvalSpec, Group, check_names
from shortrun.evaluation.sampling import sample_in_chunks
from shortrun.metrics.mmd import mmd2

VECTOR_METRICS = ("kl_grid", "loglik_grid", "mmd")
IMAGE_METRICS = ("fd", "kid")
GRID_METRICS = ("kl_grid", "loglik_grid")
NO_DENSITY = ("kl_grid needs a closed-form data density (the Gaussian mixtures); this data set "
              "has none: use --metrics mmd")


def choose(cfg: Any, info: Any, requested: list[str], model_name: str) -> list[str]:
    """Defaults follow the data: 2-D gets the grid metrics (``kl_grid`` only where the data
    density is known in closed form) and MMD, images get FD."""
    two_d = tuple(info.shape) == (2,)
    if not requested:
        if not two_d:
            return ["fd"]
        has_density = toy_density(getattr(cfg.data, "name", "")) is not None
        return [m for m in VECTOR_METRICS if has_density or m != "kl_grid"]
    chosen = check_names(model_name, SPEC, requested)
    wrong = [m for m in chosen if m != "chains" and (m in VECTOR_METRICS) != two_d]
    if wrong:
        kind, ok = ("2-D", VECTOR_METRICS) if two_d else ("image", IMAGE_METRICS)
        raise ConfigError(f"--metrics: {', '.join(wrong)} not available for {kind} data; "
                          f"use {', '.join(ok)}")
    return chosen


def plan(ctx: EvalContext, metrics: list[str]) -> list[Group]:
    cfg, model, data = ctx.cfg, ctx.model, ctx.data
    if tuple(model.info.shape) != (2,):
        return [sampled_fd_kid_group(ctx, metrics)]
    groups = []
    grid = [m for m in metrics if m in GRID_METRICS]
    if grid:
        def has_density() -> None:
            if "kl_grid" in grid and data.extras.get("density") is None:
                raise ConfigError(NO_DENSITY)

        groups.append(Group("/".join(grid),
                            lambda done: grid_metrics(model.density_energy(), data, grid),
                            (has_density,)))
    if "mmd" in metrics or ctx.run_dir is not None:
        def samples_mmd_and_picture(done: dict) -> dict:
            n = cfg.eval.n_samples
            with ctx.progress.task("sampling", n, "samples") as tick:
                samples = sample_in_chunks(model.sample, n, cfg.eval.batch_size, tick)
            out: dict[str, Any] = {}
            if "mmd" in metrics:
                ref = data.test if data.test is not None else data.train
                out["mmd"] = mmd2(samples, ref[:n])
                out["mmd_n"] = len(samples)
            if ctx.run_dir is not None:
                shown = {**done, **out}
                parts = [f"{k}={shown[k]:.3g}" for k in ("kl_grid", "mmd") if k in shown]
                title = f"{cfg.recipe or cfg.model.name}  " + "  ".join(parts)
                save_density_and_samples(model.density_energy(), samples, data.train,
                                         plot_half_width(data), Path(ctx.run_dir) / "density.png",
                                         title=title)
            return out

        groups.append(Group("mmd" if "mmd" in metrics else "density.png",
                            samples_mmd_and_picture))
    return groups


SPEC = EvalSpec(VECTOR_METRICS + IMAGE_METRICS + ("chains",), ("kl_grid", "loglik_grid", "mmd"),
                with_chains(plan), choose)
