"""``shortrun report RUN_DIR``: one self-contained HTML page about a run, PNGs beside it.

The page (``RUN_DIR/report/index.html``) shows, from what the run directory already holds:

- the run's recipe, description and resolved config (``config.yaml``);
- the evaluation table (``eval.json``, written by ``shortrun eval``);
- training curves from ``metrics.jsonl``: ``loss``; ``energy_pos``/``energy_neg``/``energy_gap``
  together (the contrastive picture users watch, ebmkit-style); every other logged metric
  (chain statistics, gradient norms, learning rates) in small multiples;
- the energy traces of the long chains of ``shortrun diagnose`` / ``eval --metrics chains``
  (``chains.npz``), one line per chain, beside their ESS and split-R̂ in the evaluation table;
- the precision–recall curve of an anomaly run, from ``eval_scores.npz`` (keys ``scores``,
  ``labels``; anomalies = 1, higher score = more anomalous — see
  :func:`shortrun.metrics.anomaly.save_scores`);
- the sample grids drawn during training (``samples/step_*.png``; for 2-D runs these are the
  density heat maps), copied beside the page so the folder can be moved or attached as is.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import numpy as np

from shortrun.errors import ConfigError
from shortrun.plotting import pyplot

ENERGY_KEYS = ("energy_pos", "energy_neg", "energy_gap")
SKIP_KEYS = {"step", "epoch", "time"}
MAX_GRIDS = 12


def read_metrics(path: Path) -> list[dict]:
    """Rows of ``metrics.jsonl``; unreadable lines (a run killed mid-write) are skipped."""
    rows = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def _series(rows: list[dict], key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for r in rows:
        v = r.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            xs.append(r.get("step", len(xs)))
            ys.append(float(v))
    return xs, ys


def _marker(xs: list) -> str | None:
    # A short run logs a handful of points; a bare line through one point is invisible.
    return "o" if len(xs) < 30 else None


def plot_curves(rows: list[dict], keys: list[str], path: Path, title: str) -> None:
    """One panel per key, sharing the step axis."""
    plt = pyplot("report curves")
    cols = min(3, len(keys))
    nrows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 2.8 * nrows), dpi=90,
                             squeeze=False)
    for ax, key in zip(axes.flat, keys, strict=False):
        xs, ys = _series(rows, key)
        ax.plot(xs, ys, lw=1.2, marker=_marker(xs))
        ax.set_title(key, fontsize=10)
        ax.set_xlabel("step", fontsize=8)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_energies(rows: list[dict], path: Path) -> None:
    plt = pyplot("report curves")
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=90)
    for key in ENERGY_KEYS:
        xs, ys = _series(rows, key)
        if ys:
            ax.plot(xs, ys, label=key, lw=1.2, marker=_marker(xs))
    ax.set_xlabel("step")
    ax.set_ylabel("energy (lower = more probable)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_pr_curve(scores: np.ndarray, labels: np.ndarray, path: Path) -> dict[str, float]:
    from shortrun.metrics.anomaly import auprc, auroc, pr_curve

    recall, precision = pr_curve(scores, labels)
    values = {"auprc": auprc(scores, labels), "auroc": auroc(scores, labels)}
    plt = pyplot("report curves")
    fig, ax = plt.subplots(figsize=(4.5, 4), dpi=90)
    ax.step(recall, precision, where="post")
    ax.axhline(float(np.mean(labels)), ls="--", c="gray", lw=1, label="chance (prevalence)")
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_title(f"AUPRC {values['auprc']:.4f}, AUROC {values['auroc']:.4f}")
    ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return values


def plot_reliability(table: dict, ece: float, path: Path) -> None:
    """The reliability diagram of a classifier (``eval.json``'s ``reliability``): accuracy
    against mean confidence per bin, the diagonal being perfect calibration."""
    conf, acc, count = (np.asarray(table[k], dtype=float)
                        for k in ("confidence", "accuracy", "count"))
    edges = np.linspace(0, 1, len(count) + 1)
    plt = pyplot("report curves")
    fig, ax = plt.subplots(figsize=(4.5, 4), dpi=90)
    full = count > 0
    ax.bar(edges[:-1][full], acc[full], width=1 / len(count), align="edge", alpha=0.7,
           edgecolor="k", label="accuracy")
    ax.plot(conf[full], conf[full], "o", ms=3, c="C3", label="mean confidence")
    ax.plot([0, 1], [0, 1], ls="--", c="gray", lw=1)
    ax.set_xlabel("confidence")
    ax.set_ylabel("accuracy")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_title(f"ECE {ece:.4f}")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _pick_grids(paths: list[Path]) -> list[Path]:
    """At most ``MAX_GRIDS`` grids, evenly spaced over training, always with the last."""
    if len(paths) <= MAX_GRIDS:
        return paths
    idx = np.linspace(0, len(paths) - 1, MAX_GRIDS).round().astype(int)
    return [paths[i] for i in sorted(set(idx))]


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


FRECHET_KEYS = ("fd", "fd_generator", "fd_revised")


def frechet_note(d: dict) -> str:
    """The provenance of an FD in one line (empty for an eval.json written before it):
    floor, extractor and its weights hash, sample sizes, reference split."""
    if "fd_floor" not in d:
        return ""
    sha = str(d.get("fd_extractor_sha256") or "unknown")[:12]
    return (f"floor (real vs real) {_fmt(d['fd_floor'])} at n={d.get('fd_floor_n', '?')}; "
            f"extractor {d.get('fd_extractor', '?')} (sha256 {sha}…); "
            f"{d.get('fd_n', '?')} generated vs {d.get('fd_reference', '?')} split "
            f"(n={d.get('fd_n_ref', '?')})")


def frechet_lines(run_dir: Path) -> list[str]:
    """``KEY VALUE (provenance)`` for every FD in ``RUN_DIR/eval.json``: what
    ``shortrun report`` prints in the terminal."""
    path = Path(run_dir) / "eval.json"
    d = json.loads(path.read_text()) if path.is_file() else {}
    note = frechet_note(d)
    return [f"{k} {_fmt(d[k])}" + (f"  ({note})" if note else "")
            for k in FRECHET_KEYS if k in d]


def loglik_note(d: dict) -> str:
    """How to read ``loglik`` (docs/evaluation.md): its error, its bias, and for latent models
    the BDMC sandwich gap on simulated data (empty without a loglik)."""
    if "loglik" not in d:
        return ""
    note = f"± {_fmt(d.get('loglik_se', float('nan')))} nats (Monte Carlo)"
    if "bdmc_gap" in d:
        return (f"{note}; forward AIS, a stochastic lower bound; sandwich gap on "
                f"{_fmt(d.get('bdmc_n'))} simulated points {_fmt(d['bdmc_gap'])} nats")
    if "loglik_log_z" in d:
        return f"{note}; log Z from AIS is biased low, so this is biased high"
    return note


def _table(d: dict) -> str:
    note, ll_note = frechet_note(d), loglik_note(d)
    rows = "".join(
        f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(_fmt(v))}</td>"
        f"<td>{html.escape(note if k in FRECHET_KEYS else ll_note if k == 'loglik' else '')}"
        f"</td></tr>"
        for k, v in sorted(d.items()))
    return f"<table><tr><th>metric</th><th>value</th><th>provenance</th></tr>{rows}</table>"


def _img(name: str, caption: str) -> str:
    return (f'<figure><img src="{html.escape(name)}" alt="{html.escape(caption)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
         "img{max-width:100%;border:1px solid #ddd}figure{display:inline-block;margin:.5em}"
         "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;"
         "text-align:left}pre{background:#f6f6f6;padding:1em;overflow:auto}")


def write_report(run_dir: Path, out_dir: Path | None = None) -> Path:
    """Write the page and its PNGs; returns the path of the HTML file."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no config.yaml); give the --out "
                          "folder of a `shortrun train` run")
    pyplot("report curves")  # a missing matplotlib fails here, before any file is written
    out = Path(out_dir) if out_dir is not None else run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    import yaml

    config_text = (run_dir / "config.yaml").read_text()
    config = yaml.safe_load(config_text) or {}
    title = config.get("recipe") or run_dir.name
    parts = [f"<h1>{html.escape(str(title))}</h1>",
             f"<p>{html.escape(str(config.get('description', '')))}</p>",
             f"<p>run directory: <code>{html.escape(str(run_dir.resolve()))}</code></p>"]

    eval_path = run_dir / "eval.json"
    parts.append("<h2>Evaluation</h2>")
    if eval_path.is_file():
        evaluated = json.loads(eval_path.read_text())
        parts.append(_table(evaluated))
        if isinstance(evaluated.get("reliability"), dict) and "ece" in evaluated:
            plot_reliability(evaluated["reliability"], evaluated["ece"],
                             out / "reliability.png")
            parts.append(_img("reliability.png", "reliability diagram (calibration)"))
    else:
        parts.append(f"<p>No eval.json yet: run <code>shortrun eval {html.escape(str(run_dir))}"
                     "</code>.</p>")

    traces = run_dir / "chains.npz"
    if traces.is_file():
        from shortrun.evaluation.chains import plot_traces

        plot_traces(traces, out / "chains.png")
        parts += ["<h2>Chain diagnostics</h2>",
                  "<p>Energy of every long chain at every step (warm-up shaded); their ESS "
                  "(<code>chain_ess*</code>), split-R̂ (<code>chain_rhat*</code>) and acceptance "
                  "(<code>accept*</code>) are in the table above.</p>",
                  _img("chains.png", "energy traces of the long chains")]

    scores = run_dir / "eval_scores.npz"
    if scores.is_file():
        with np.load(scores, allow_pickle=False) as f:
            plot_pr_curve(f["scores"], f["labels"], out / "pr_curve.png")
        parts += ["<h2>Anomaly detection</h2>",
                  "<p>Anomalies are the positive class; a higher score is more anomalous.</p>",
                  _img("pr_curve.png", "precision–recall curve")]

    rows = read_metrics(run_dir / "metrics.jsonl")
    parts.append("<h2>Training curves</h2>")
    if rows:
        keys = sorted({k for r in rows for k, v in r.items()
                       if k not in SKIP_KEYS and isinstance(v, (int, float))})
        if "loss" in keys:
            plot_curves(rows, ["loss"], out / "curve_loss.png", "loss")
            parts.append(_img("curve_loss.png", "loss"))
        if any(k in keys for k in ENERGY_KEYS):
            plot_energies(rows, out / "curve_energies.png")
            parts.append(_img("curve_energies.png", "energy_pos, energy_neg, energy_gap"))
        others = [k for k in keys if k != "loss" and k not in ENERGY_KEYS]
        if others:
            plot_curves(rows, others, out / "curve_other.png", "other logged metrics")
            parts.append(_img("curve_other.png", "other logged metrics"))
    else:
        parts.append("<p>No metrics.jsonl rows yet.</p>")

    grids = _pick_grids(sorted((run_dir / "samples").glob("step_*.png")))
    parts.append("<h2>Samples over training</h2>")
    if not grids:
        parts.append("<p>No sample grids (samples/step_*.png) in this run.</p>")
    for grid in grids:
        name = f"samples_{grid.name}"
        shutil.copyfile(grid, out / name)
        step = grid.stem.removeprefix("step_").lstrip("0") or "0"
        parts.append(_img(name, f"step {step}"))

    parts += ["<h2>Config</h2>", f"<pre>{html.escape(config_text)}</pre>"]
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>"
            f"{html.escape(str(title))} — shortrun report</title><style>{STYLE}</style></head>"
            f"<body>{''.join(parts)}</body></html>\n")
    path = out / "index.html"
    path.write_text(page)
    return path
