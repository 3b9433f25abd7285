"""One table on 25 Gaussians: grid KL(data‖model) and sample MMD of the Langevin-trained EBM
beside the score-matching variants (DSM one σ, DSM σ ladder, noise-conditional DSM ladder read
at σ_min, sliced SM), with the steps, process CPU seconds and wall seconds of each training.

Each row trains its recipe with ``train.threads=1`` and evaluates with ``shortrun eval``'s
code path. ``--reuse NAME=RUN_DIR`` takes an already trained run instead (its eval.json is
recomputed, its times are read from ``RUN_DIR/timing.json`` if present).

    SHORTRUN_DATA=... .venv/bin/python bench/ebm_kl_table.py --out /tmp/kl_table

``--compare DATA`` (``8gaussians`` or ``25gaussians``) instead puts the chain-free losses
beside the Langevin EBM at equal compute: it times ``--calibrate`` training steps of
``ebm_DATA``, ``nce_DATA`` and ``ed_DATA`` side by side in this process (interleaved rounds,
process CPU seconds, one thread), gives each the step count that costs what the EBM recipe's
own steps cost, trains every method for every ``--seeds`` and prints ``kl_grid`` mean ± std.
Finished runs in ``--out`` are reused (their ``table_row.json``), and so is the calibration
(``DATA/calibration.json``), so seeds run in separate calls get the same step counts.

    .venv/bin/python bench/ebm_kl_table.py --compare 25gaussians --seeds 0 1 2 --out runs/klc
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from shortrun.run import load_run
from shortrun.train.config import resolve
from shortrun.train.trainer import Trainer

ROWS = {
    "ebm (Langevin + buffer + MH jumps)": ("ebm_25gaussians", []),
    "dsm, one sigma = 0.1": ("dsm_25gaussians", []),
    "dsm, sigma ladder, unconditional": ("dsm_25gaussians", ["model.n_sigmas=10"]),
    "dsm, sigma ladder, noise-conditional @ sigma_min": (
        "dsm_25gaussians", ["model.n_sigmas=10", "model.conditional=true"]),
    "ssm (Rademacher, variance-reduced)": ("ssm_25gaussians", []),
}


def train_timed(recipe: str, sets: list[str], out: Path) -> dict:
    cfg = resolve(recipe, [*sets, "train.threads=1", "train.progress=false"])
    trainer = Trainer(cfg, out)
    wall, cpu = time.perf_counter(), time.process_time()
    trainer.fit()
    timing = {"steps": trainer.step, "wall_s": time.perf_counter() - wall,
              "cpu_s": time.process_time() - cpu}
    (out / "timing.json").write_text(json.dumps(timing))
    return timing


def evaluate(run_dir: Path) -> dict:
    from shortrun.evaluation import evaluate_run

    return evaluate_run(load_run(run_dir), ["kl_grid", "mmd"], write=False)


def blindness_figure(path: Path) -> str:
    """Two 1-D mixtures of N(±3, 0.5²) with weights 0.5/0.5 and 0.9/0.1: their scores agree
    everywhere but in the empty valley, so the Fisher divergence that score matching minimises
    barely sees a weight error that costs 0.51 nats of KL."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = torch.linspace(-6, 6, 4001, dtype=torch.float64)
    dx = float(x[1] - x[0])

    def log_p(w: float) -> torch.Tensor:
        comp = torch.stack([-(x - 3) ** 2 / 0.5, -(x + 3) ** 2 / 0.5])  # 2σ² = 0.5
        return torch.logsumexp(comp + torch.tensor([[w], [1 - w]]).log(), 0)

    def normalised(w: float) -> torch.Tensor:
        lp = log_p(w)
        return lp - torch.logsumexp(lp, 0) - torch.log(torch.tensor(dx))

    lp_a, lp_b = normalised(0.5), normalised(0.9)
    score_a = torch.gradient(lp_a, spacing=dx)[0]
    score_b = torch.gradient(lp_b, spacing=dx)[0]
    p_a = lp_a.exp()
    kl = float((p_a * (lp_a - lp_b)).sum() * dx)
    fisher = float((0.5 * p_a * (score_a - score_b) ** 2).sum() * dx)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), dpi=100)
    axes[0].plot(x, p_a, label="data: weights 0.5 / 0.5")
    axes[0].plot(x, lp_b.exp(), "--", label="model: weights 0.1 / 0.9")
    axes[0].set_title(f"densities: KL(data‖model) = {kl:.2f} nats")
    axes[1].plot(x, score_a, label="data score")
    axes[1].plot(x, score_b, "--", label="model score")
    axes[1].set_ylim(-15, 15)
    axes[1].set_title(f"scores: Fisher divergence = {fisher:.1e}")
    for ax in axes:
        ax.legend(fontsize=7)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return f"KL = {kl:.3f} nats, Fisher divergence = {fisher:.2e}"


COMPARE = ("ebm", "nce", "ed")


def seconds_per_step(recipes: list[str], n: int, rounds: int = 3) -> dict[str, float]:
    """Process CPU seconds of one training step of each recipe, interleaved ``rounds`` times
    so that a change of load on a shared machine hits every recipe alike (after a warm-up)."""
    from shortrun.data.registry import load_data
    from shortrun.models.base import OptimOptions
    from shortrun.models.registry import build_model

    setups = {}
    for recipe in recipes:
        cfg = resolve(recipe, ["train.threads=1"])
        data = load_data(cfg.data)
        torch.manual_seed(0)
        model = build_model(cfg, data.info)
        model.reference_data = data
        model.on_train_start(data)
        opts = model.configure_training(OptimOptions.from_train(cfg.train))
        bs = cfg.train.batch_size
        model.training_step(data.train[:bs], 0, opts)
        setups[recipe] = (model, opts, data.train, bs)
    spent = dict.fromkeys(recipes, 0.0)
    for _ in range(rounds):
        for recipe, (model, opts, x, bs) in setups.items():
            start = time.process_time()
            for k in range(n):
                i = (k * bs) % (x.shape[0] - bs)
                model.training_step(x[i: i + bs], k, opts)
            spent[recipe] += time.process_time() - start
    return {r: t / (rounds * n) for r, t in spent.items()}


def compare(data: str, seeds: list[int], out: Path, calibrate: int) -> None:
    """NCE and ED beside the Langevin EBM on ``data`` at the EBM recipe's compute."""
    from shortrun.hardware import cpu_model

    recipes = {m: f"{m}_{data}" for m in COMPARE}
    cal_file = out / data / "calibration.json"  # one calibration for every seed of a data set
    if cal_file.is_file():
        cost = json.loads(cal_file.read_text())
    else:
        cost = seconds_per_step(list(recipes.values()), calibrate)
        cal_file.parent.mkdir(parents=True, exist_ok=True)
        cal_file.write_text(json.dumps(cost))
    ebm_steps = resolve(recipes["ebm"]).train.steps
    budget = ebm_steps * cost[recipes["ebm"]]
    steps = {m: max(1, round(budget / cost[r])) for m, r in recipes.items()}
    steps["ebm"] = ebm_steps
    print(f"{cpu_model()}, torch {torch.__version__}; CPU s per step: "
          + ", ".join(f"{m} {cost[r] * 1000:.1f} ms" for m, r in recipes.items())
          + f"; budget {budget:.0f} CPU s = {ebm_steps} ebm steps; steps {steps}", flush=True)
    rows = {m: [] for m in COMPARE}
    for seed in seeds:
        for method, recipe in recipes.items():
            run_dir = out / data / f"{method}_seed{seed}"
            row_file = run_dir / "table_row.json"
            if row_file.is_file():
                row = json.loads(row_file.read_text())
            else:
                # no sample pictures during training: the same for every method, and not
                # what the step budget was calibrated on
                timing = train_timed(recipe, [f"train.seed={seed}", f"train.steps={steps[method]}",
                                              "train.sample_every=1000000"], run_dir)
                row = {"recipe": recipe, "seed": seed, **timing,
                       **evaluate_kl(run_dir)}
                row_file.write_text(json.dumps(row))
            rows[method].append(row)
            print(f"{recipe} seed {seed}: kl_grid {row['kl_grid']:.4f}, {row['steps']} steps, "
                  f"{row['cpu_s']:.0f} CPU s, {row['wall_s']:.0f} wall s", flush=True)
    lines = ["| model | kl_grid (nats), mean ± std | seeds | steps | CPU s per step | "
             "train CPU s (mean) |", "|---|---:|---:|---:|---:|---:|"]
    for method, recipe in recipes.items():
        kls = [r["kl_grid"] for r in rows[method]]
        sd = statistics.stdev(kls) if len(kls) > 1 else float("nan")
        cpu = statistics.mean(r["cpu_s"] for r in rows[method])
        lines.append(f"| `{recipe}` | {statistics.mean(kls):.3f} ± {sd:.3f} | {len(kls)} | "
                     f"{steps[method]} | {cost[recipe] * 1000:.1f} ms | {cpu:.0f} |")
    print("\n".join(lines))


def evaluate_kl(run_dir: Path) -> dict:
    from shortrun.evaluation import evaluate_run

    return evaluate_run(load_run(run_dir), ["kl_grid"], write=False)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--blindness-figure", type=Path, default=None,
                   help="only draw the 1-D mode-weight picture to this PNG and exit")
    p.add_argument("--out", type=Path, default=Path("runs/kl_table"))
    p.add_argument("--reuse", action="append", default=[], metavar="NAME=RUN_DIR")
    p.add_argument("--only", default="", help="comma-separated row-name prefixes")
    p.add_argument("--compare", choices=("8gaussians", "25gaussians"), default=None,
                   help="NCE and ED beside the Langevin EBM at equal compute on this data")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--calibrate", type=int, default=20, help="--compare: steps per timing round")
    args = p.parse_args()
    if args.compare:
        torch.set_num_threads(1)
        compare(args.compare, args.seeds, args.out, args.calibrate)
        return
    if args.blindness_figure:
        print(blindness_figure(args.blindness_figure))
        return
    torch.set_num_threads(1)
    reuse = dict(r.split("=", 1) for r in args.reuse)
    lines = ["| model | kl_grid (nats) | mmd | steps | train CPU s | train wall s |",
             "|---|---:|---:|---:|---:|---:|"]
    for i, (name, (recipe, sets)) in enumerate(ROWS.items()):
        if args.only and not any(name.startswith(o) for o in args.only.split(",")):
            continue
        key = name.split(",")[0].split(" ")[0] + str(i)
        run_dir = Path(reuse.get(key, args.out / key))
        if key in reuse:
            tfile = run_dir / "timing.json"
            timing = json.loads(tfile.read_text()) if tfile.is_file() else {}
        else:
            timing = train_timed(recipe, sets, run_dir)
        res = evaluate(run_dir)
        cpu, wall = timing.get("cpu_s", float("nan")), timing.get("wall_s", float("nan"))
        row = (f"| {name} | {res['kl_grid']:.3f} | {res['mmd']:.4f} | {timing.get('steps', '?')}"
               f" | {cpu:.0f} | {wall:.0f} |")
        lines.append(row)
        print(row, flush=True)
        (run_dir / "table_row.json").write_text(json.dumps({"name": name, **res, **timing}))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
