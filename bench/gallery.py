"""The latent-model gallery (issue #18): every picture of docs/lebm.md, docs/dual_mcmc.md and
docs/text.md, regenerated from the shipped recipes by one command (``make gallery``).

    SHORTRUN_DATA=/path/to/data python bench/gallery.py [--runs runs/gallery] [--out docs/img]

Each picture needs trained runs (table ``RUNS``). A run directory under ``--runs`` that already
finished (``checkpoints/last.pt`` at its config's ``train.steps``) is reused; a missing one is
trained with ``shortrun train RECIPE --set ...`` (``--jobs`` at a time, one thread each); an
unfinished one is resumed (``shortrun train --resume``), unless it was written to in the last
``--busy-minutes`` (another training is probably running there: the gallery stops and says so).
``--no-train`` draws only the sections whose runs are all finished. ``--set KEY=VALUE`` goes to
every training the gallery starts (the test uses ``--set train.steps=2 --tiny``).

Writes into ``--out``: the PNGs, ``lebm_ptb_small_samples.md`` (the text table) and
``gallery_numbers.json`` (the numbers in the captions, the runs used, timings, CPU, torch).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gallery_draw as draw
import torch

from shortrun.data import load_data
from shortrun.hardware import cpu_model
from shortrun.run import load_run
from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.rundir import LAST, read_config

ONE_THREAD = "train.threads=1"  # two trainings share two cores
TEXT_STEPS = "train.steps=300"  # the full 1000 steps are ~60 CPU min each; see docs/text.md


@dataclass(frozen=True)
class RunSpec:
    recipe: str
    overrides: tuple[str, ...] = ()
    minutes: float = 16.0  # about how long it trains on one core: the longest start first


RUNS: dict[str, RunSpec] = {
    "lebm_mnist": RunSpec("lebm_mnist", (ONE_THREAD,)),
    "lebm_mnist_gaussian": RunSpec("lebm_mnist", (ONE_THREAD, "model.prior=gaussian"), minutes=7),
    "lebm_fashion": RunSpec("lebm_mnist", (ONE_THREAD, "data.name=fashion")),
    "lebm_fashion_gaussian": RunSpec("lebm_mnist", (ONE_THREAD, "data.name=fashion",
                                                    "model.prior=gaussian"), minutes=7),
    "dual_mcmc_fashion": RunSpec("dual_mcmc_fashion", minutes=21),
    "lebm_mnist_anomaly": RunSpec("lebm_mnist_anomaly", (ONE_THREAD,), minutes=40),
    "lebm_ptb_small": RunSpec("lebm_ptb_small", (ONE_THREAD, TEXT_STEPS), minutes=15),
    "lebm_ptb_small_gaussian": RunSpec("lebm_ptb_small", (ONE_THREAD, TEXT_STEPS,
                                                          "model.prior=gaussian"), minutes=12),
}
SECTIONS: dict[str, tuple[str, ...]] = {
    "mnist": ("lebm_mnist", "lebm_mnist_gaussian"),
    "fashion": ("lebm_fashion", "lebm_fashion_gaussian"),
    "dual": ("dual_mcmc_fashion",),
    "anomaly": ("lebm_mnist_anomaly",),
    "text": ("lebm_ptb_small", "lebm_ptb_small_gaussian"),
}


# --- runs ------------------------------------------------------------------------------------
def run_state(run_dir: Path) -> tuple[str, int | None, int | None]:
    """``(state, step, steps)``: state ``missing`` / ``finished`` / ``unfinished``; the Trainer
    writes ``checkpoints/last.pt`` at its last step, so finished = that step is ``train.steps``."""
    if not (run_dir / "config.yaml").is_file():
        return "missing", None, None
    steps = read_config(run_dir).train.steps
    if not (run_dir / LAST).is_file():
        return "unfinished", 0, steps
    step = int(load_checkpoint(run_dir / LAST)["step"])
    done = steps is None or step >= steps  # an epochs-based run: its last checkpoint
    return ("finished" if done else "unfinished"), step, steps


def last_write_age_s(run_dir: Path) -> float:
    paths = [run_dir / "metrics.jsonl", run_dir / LAST, run_dir / "config.yaml"]
    return time.time() - max(p.stat().st_mtime for p in paths if p.exists())


def train_command(name: str, run_dir: Path, state: str, extra: list[str]) -> list[str]:
    sets = [f"--set={o}" for o in (*RUNS[name].overrides, "train.progress=false", *extra)]
    if state == "unfinished":
        # a resumed run keeps its config; only the gallery's own --set values are applied
        return [sys.executable, "-m", "shortrun", "train", "--resume", str(run_dir),
                *[f"--set={o}" for o in extra]]
    return [sys.executable, "-m", "shortrun", "train", RUNS[name].recipe, *sets,
            "--out", str(run_dir)]


def prepare_runs(names: list[str], runs: Path, extra: list[str], jobs: int, busy_min: float,
                 no_train: bool) -> set[str]:
    """Train or resume what is missing; returns the names of the finished runs."""
    todo, ready = [], set()
    for name in names:
        state, step, steps = run_state(runs / name)
        if state == "finished":
            print(f"reuse {runs / name} (step {step})")
            ready.add(name)
            continue
        if no_train:
            print(f"skip {name}: {state} (--no-train)")
            continue
        if state == "unfinished" and last_write_age_s(runs / name) < 60 * busy_min:
            sys.exit(f"gallery: {runs / name} is unfinished (step {step} of {steps}) and was "
                     f"written to in the last {busy_min:g} min: another training seems to be "
                     "running there; wait for it, or rerun with --no-train to draw the rest")
        todo.append((name, train_command(name, runs / name, state, extra)))
    todo.sort(key=lambda item: -RUNS[item[0]].minutes)  # longest first: two cores end together
    logs = runs / "logs"
    running: list[tuple[str, subprocess.Popen, Any]] = []
    while todo or running:
        while todo and len(running) < jobs:
            name, cmd = todo.pop(0)
            logs.mkdir(parents=True, exist_ok=True)
            log = open(logs / f"{name}.log", "w")  # noqa: SIM115 - closed when it ends
            print(f"train {name}: {' '.join(cmd[2:])}", flush=True)
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            running.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                   env=env), log))
        time.sleep(0.5)
        for item in list(running):
            name, proc, log = item
            if proc.poll() is None:
                continue
            running.remove(item)
            log.close()
            if proc.returncode != 0:
                sys.exit(f"gallery: training {name} failed (exit {proc.returncode}); see "
                         f"{logs / (name + '.log')}")
            ready.add(name)
    return ready


# --- sections --------------------------------------------------------------------------------
def test_split(cfg: Any) -> torch.Tensor:
    data = load_data(cfg.data)
    return data.test


def section_lebm(runs: Path, out: Path, key: str, label: str, s: draw.Sizes) -> dict:
    ebm_run, gauss_run = (load_run(runs / n) for n in SECTIONS[key])
    ebm, gauss = ebm_run.model, gauss_run.model
    x = test_split(ebm_run.cfg)
    got = {}
    got.update(draw.lebm_prior_samples(ebm, gauss, out / f"lebm_{key}_prior.png", label, s))
    got.update(draw.lebm_reconstructions(ebm, gauss, x, out / f"lebm_{key}_recon.png", label,
                                         s))
    got.update(draw.lebm_long_chain(ebm, out / f"lebm_{key}_long_chain.png", label, s))
    got.update(draw.lebm_interpolation(ebm, x, out / f"lebm_{key}_interpolation.png", label, s))
    return got


def section_dual(runs: Path, out: Path, s: draw.Sizes) -> dict:
    run = load_run(runs / "dual_mcmc_fashion")
    x = test_split(run.cfg)
    return {**draw.dual_revision(run.model, out / "dual_mcmc_fashion_revision.png", s),
            **draw.dual_reconstructions(run.model, x, out / "dual_mcmc_fashion_recon.png", s)}


def section_anomaly(runs: Path, out: Path, s: draw.Sizes, scores: tuple[str, ...]) -> dict:
    run = load_run(runs / "lebm_mnist_anomaly")
    data = load_data(run.cfg.data)
    digit = int(run.cfg.data.anomaly_digit)
    x, labels = data.test, (data.test_labels == digit).long()
    if s.anomaly_max is not None and len(x) > s.anomaly_max:
        keep = torch.randperm(len(x), generator=draw.seeded(6))[: s.anomaly_max]
        x, labels = x[keep], labels[keep]
        if labels.min() == labels.max():  # a tiny subsample must still hold both classes
            x, labels = torch.cat([x, data.test[data.test_labels == digit][:1]]), \
                torch.cat([labels, torch.ones(1, dtype=torch.long)])
    return draw.anomaly_figure(run.model, x, labels.numpy(), digit, scores,
                               run.cfg.model.eval_post_steps, out / "lebm_mnist_anomaly.png")


def sentences(run_dir: Path, n: int) -> list[str]:
    from shortrun.data.ptb import decode

    run = load_run(run_dir)
    vocab = load_data(run.cfg.data).extras["vocab"]
    return decode(run.model.sample(n, generator=draw.seeded(7)), vocab)


def paste_between_markers(doc: Path, tag: str, text: str) -> None:
    """Replace what lies between ``<!-- TAG:begin -->`` and ``<!-- TAG:end -->`` in ``doc``
    (with ``--out docs/img``: docs/text.md), so the page shows the table just made."""
    begin, end = f"<!-- {tag}:begin -->", f"<!-- {tag}:end -->"
    page = doc.read_text(encoding="utf-8") if doc.is_file() else ""
    if begin not in page or end not in page:
        return
    head, rest = page.split(begin, 1)
    doc.write_text(f"{head}{begin}\n{text}{end}{rest.split(end, 1)[1]}", encoding="utf-8")
    print(f"pasted the table into {doc}")


def section_text(runs: Path, out: Path, s: draw.Sizes) -> dict:
    ebm, gauss = (sentences(runs / n, s.sentences) for n in SECTIONS["text"])
    steps = {n: run_state(runs / n)[1] for n in SECTIONS["text"]}
    table = draw.sentence_table([(f"EBM prior ({steps['lebm_ptb_small']} steps)", ebm),
                                 (f"Gaussian prior ({steps['lebm_ptb_small_gaussian']} steps)",
                                  gauss)])
    (out / "lebm_ptb_small_samples.md").write_text(table, encoding="utf-8")
    paste_between_markers(out.parent / "text.md", "gallery:text", table)
    return {"sentences": {"ebm": ebm, "gaussian": gauss}}


def draw_section(key: str, runs: Path, out: Path, s: draw.Sizes, scores: tuple[str, ...]):
    if key in ("mnist", "fashion"):
        return section_lebm(runs, out, key, {"mnist": "MNIST", "fashion": "Fashion-MNIST"}[key],
                            s)
    if key == "dual":
        return section_dual(runs, out, s)
    if key == "anomaly":
        return section_anomaly(runs, out, s, scores)
    return section_text(runs, out, s)


def run_record(run_dir: Path) -> dict:
    cfg = read_config(run_dir)
    state, step, _ = run_state(run_dir)
    return {"recipe": cfg.recipe, "step": step, "data": cfg.data.name,
            "prior": getattr(cfg.model, "prior", None), "seed": cfg.train.seed}


def cpu_now() -> tuple[float, float]:
    """(this process's CPU s, finished children's CPU s)."""
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, default=Path("runs/gallery"))
    ap.add_argument("--out", type=Path, default=Path("docs/img"))
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help=f"comma-separated sections of {', '.join(SECTIONS)}")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="KEY=VALUE for every training the gallery starts")
    ap.add_argument("--jobs", type=int, default=2, help="trainings at a time (one thread each)")
    ap.add_argument("--no-train", action="store_true", help="draw only from finished runs")
    ap.add_argument("--busy-minutes", type=float, default=10.0)
    ap.add_argument("--scores", default="joint,tilt", help="anomaly score variants")
    ap.add_argument("--tiny", action="store_true", help="test sizes: seconds, not minutes")
    args = ap.parse_args()
    keys = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SECTIONS]
    if unknown:
        sys.exit(f"gallery: unknown section {unknown[0]!r}; choose from {', '.join(SECTIONS)}")
    sizes = draw.TINY if args.tiny else draw.Sizes()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    wall0, (cpu0, child0) = time.perf_counter(), cpu_now()
    names = [n for k in keys for n in SECTIONS[k]]
    ready = prepare_runs(names, args.runs, args.overrides, args.jobs, args.busy_minutes,
                         args.no_train)
    wall1, (_, child1) = time.perf_counter(), cpu_now()
    numbers: dict[str, Any] = {}
    timing = {"train": {"wall_s": round(wall1 - wall0, 1), "cpu_s": round(child1 - child0, 1)}}
    args.out.mkdir(parents=True, exist_ok=True)
    for key in keys:
        if not set(SECTIONS[key]) <= ready:
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        with torch.random.fork_rng(devices=[]):
            numbers[key] = draw_section(key, args.runs, args.out, sizes,
                                        tuple(args.scores.split(",")))
        timing[key] = {"wall_s": round(time.perf_counter() - t0, 1),
                       "cpu_s": round(time.process_time() - c0, 1)}
        print(f"drew {key}: {timing[key]['wall_s']} s wall, {timing[key]['cpu_s']} CPU s",
              flush=True)
    wall2, (cpu2, _) = time.perf_counter(), cpu_now()
    timing["total"] = {"wall_s": round(wall2 - wall0, 1),
                       "cpu_s": round(cpu2 - cpu0 + child1 - child0, 1)}
    # a partial call (--only, --no-train) updates its sections and keeps the others'
    path = args.out / "gallery_numbers.json"
    record = json.loads(path.read_text()) if path.is_file() else {}
    for part, new in (("numbers", numbers), ("runs", {n: run_record(args.runs / n)
                                                       for n in sorted(ready)}),
                      ("timing", {k: v for k, v in timing.items() if k in numbers})):
        record[part] = {**record.get(part, {}), **new}
    record.setdefault("calls", []).append({**timing, "sections": list(numbers)})
    record.update(cpu=cpu_model(), torch=torch.__version__, threads=torch.get_num_threads(),
                  sizes="tiny" if args.tiny else "full")
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"gallery: {len(numbers)} of {len(keys)} sections drawn into {args.out}; "
          f"{timing['total']['wall_s']} s wall, {timing['total']['cpu_s']} CPU s "
          f"({cpu_model()}, torch {torch.__version__})")


if __name__ == "__main__":
    main()
