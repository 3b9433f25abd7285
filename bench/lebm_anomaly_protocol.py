"""LEBM MNIST anomaly detection, the papers' protocol with selection on validation only.

For each held-out digit ``d`` and training seed ``s`` (Pang et al. 2020 report mean ± std
over 3 seeds):

1. **Selection run** ``OUT/d{d}/s{s}/select``: ``lebm_mnist_anomaly`` with
   ``data.anomaly_val_digit = v(d)`` (default ``(d + 1) % 10``): the training images of
   ``v`` and a ``data.anomaly_val_fraction`` slice of the normal training images leave
   training and form the validation split. Trained in stages (``--stages``); after each, the
   score terms of the validation split are saved (``val_step{K}.npz``).
2. **Selection** (:func:`shortrun.evaluation.lebm_selection.select`): per score variant the
   checkpoint (and for ``joint_sigma`` the σ′ of the reconstruction term) with the best
   validation AP. The test split is never read here.
3. **Test** (``--final retrain``, the default): ``OUT/d{d}/s{s}/final`` trains the recipe on
   the full training split (no digit removed but ``d``), stopping at the chosen steps; at
   each, the test terms are scored once and every variant chosen at that step is applied.
   ``--final same`` scores the test split with the selection run itself (half the training,
   but that model never saw digit ``v``, which the test counts as normal).

``--curve`` trains nothing and prints, for every stage a selection run has scored, the
validation AP and (with ``--final same``, which scores the test split at each stage) the test
AUPRC of the fixed-form scores: a learning curve read after the fact, which chooses nothing.

``--choices-from DIR`` skips the selection run and tests the choices an earlier run recorded
in ``DIR/d{d}/s{s}/result.json`` (made on validation; recipe, digits, seed and overrides must
match). With ``--final retrain`` this adds the full training split to seeds that were
tested with ``--final same``.

Finished stages are reused: a rerun only computes what is missing. The split is
``data.anomaly_split`` of the recipe: ``pooled``, Zenati et al.'s protocol as their paper
describes it (one permutation of ``[train, test]``), which is *not* the split their loader
produces; ``--set data.anomaly_split=zenati`` gives the loader's split bit for bit, the one the
papers' numbers were measured on (:mod:`shortrun.data.anomaly_split`).

Each ``result.json`` carries ``provenance``: the commit (with a dirty flag), CPU and threads of
the scoring process and of every training session of the runs it read (from each run's
``provenance.json``, see :mod:`shortrun.train.provenance`), each run's ``train.threads``, and
this machine's route choices.
``--recipe damc_mnist_anomaly`` runs the same protocol on the diffusion-amortized prior (Yu et
al. 2023, issue 19; out ``runs/damc_anomaly_protocol``), whose posterior chains start from the
amortizer's draws (100 diffusion steps); a 4-step run that scored one stage took 9 min on the
AVX2 EPYC beside two trainings.

    SHORTRUN_DATA=/work/shared/data nice -n 5 .venv/bin/python bench/lebm_anomaly_protocol.py \
        --digits 1,4,5,7,9 --seeds 1,2,3 [--recipe damc_mnist_anomaly] \
        [--set train.steps=3000] [--stages 4] [--table OUT/table.md]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from shortrun.data.registry import load_data
from shortrun.evaluation.lebm import score_terms
from shortrun.evaluation.lebm_selection import (
    SIGMAS,
    VARIANTS,
    Choice,
    select,
    variant_scores,
)
from shortrun.metrics.anomaly import auprc, auprc_trapezoid, reference_auprcs
from shortrun.run import load_run
from shortrun.train.checkpoint import load_checkpoint
from shortrun.train.rundir import read_config

RECIPES = ("lebm_mnist_anomaly", "damc_mnist_anomaly")  # the 2020 prior; Yu et al. 2023
PAPER = {1: 0.336, 4: 0.630, 5: 0.619, 7: 0.463, 9: 0.413}  # Pang et al. 2020, Table 4
SUCCESSOR = {1: 0.684, 4: 0.911, 5: 0.939, 7: 0.801}  # Yu et al. 2023 (DAMC)
TERMS = ("sse", "prior", "tilt")


def shortrun(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "shortrun", *args], check=True)


def train_to(recipe: str, run: Path, step: int, sets: list[str]) -> None:
    """Train (or resume) ``run`` until ``step``; a run already there is left alone."""
    last = run / "checkpoints" / "last.pt"
    if last.is_file():
        if int(load_checkpoint(last)["step"]) >= step:
            return
        shortrun("train", "--resume", str(run), f"--set=train.steps={step}")
    else:
        shortrun("train", recipe, *(f"--set={o}" for o in sets), f"--set=train.steps={step}",
                 "--out", str(run))


def save_terms(path: Path, terms: dict[str, torch.Tensor], labels: torch.Tensor) -> None:
    np.savez(path, labels=labels.numpy(), **{k: terms[k].numpy() for k in TERMS})


def read_terms(path: Path) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    with np.load(path) as f:
        return {k: torch.from_numpy(f[k]) for k in TERMS}, torch.from_numpy(f["labels"])


def score_split(run: Path, split: str, step: int, seed: int) -> Path:
    """Terms of ``split`` (``val`` or ``test``) at the run's current checkpoint, cached."""
    path = run / f"{split}_step{step}.npz"
    if path.is_file():
        return path
    loaded = load_run(run)
    assert loaded.step == step, f"{run} is at step {loaded.step}, expected {step}"
    cfg, data = loaded.cfg, load_data(loaded.cfg.data)
    if split == "val":
        x, y, digit = data.extras["val"], data.extras["val_labels"], cfg.data.anomaly_val_digit
    else:
        x, y, digit = data.test, data.test_labels, cfg.data.anomaly_digit
    torch.manual_seed(seed)
    terms = score_terms(loaded.model, x, cfg.model.eval_post_steps, cfg.eval.batch_size)
    save_terms(path, terms, (y.reshape(-1) == digit).long())
    return path


def recorded_choices(path: Path, recipe: str, digit: int, val_digit: int, seed: int,
                     sets: list[str]) -> dict[str, Choice]:
    """The validation choices an earlier run of this protocol recorded in ``path``
    (its ``result.json``), after checking that they were made for this recipe, digit,
    validation digit, seed and overrides."""
    if not path.is_file():
        raise SystemExit(f"--choices-from: {path} does not exist; run the selection first "
                         "(without --choices-from) or name the directory that holds it")
    rec = json.loads(path.read_text())
    want = {"recipe": recipe, "digit": digit, "val_digit": val_digit, "seed": seed,
            "overrides": sets}
    wrong = {k: rec.get(k) for k, v in want.items() if rec.get(k) != v}
    if wrong:
        raise SystemExit(f"--choices-from: {path} was made for {wrong}, not {want}; rerun "
                         "the selection with these settings")
    return {v: Choice(v, int(c["step"]), c["sigma"], float(c["val_auprc"]))
            for v, c in rec["variants"].items()}


def one_seed(recipe: str, out: Path, digit: int, val_digit: int, seed: int, steps: list[int],
             sets: list[str], val_fraction: float, final: str,
             choices_from: Path | None = None) -> dict:
    base = [*sets, f"data.anomaly_digit={digit}", f"train.seed={seed}", "train.progress=false"]
    if choices_from is not None:  # selection made earlier (validation only): test it now
        rec = choices_from / f"d{digit}" / f"s{seed}" / "result.json"
        choices = recorded_choices(rec, recipe, digit, val_digit, seed, sets)
        return final_test(recipe, out, digit, val_digit, seed, sets, base, final, choices,
                          {"choices_from": str(rec),
                           "selected_on": json.loads(rec.read_text()).get("machine")})
    sel = out / f"d{digit}" / f"s{seed}" / "select"
    sel_sets = [*base, f"data.anomaly_val_digit={val_digit}",
                f"data.anomaly_val_fraction={val_fraction}"]
    val = {}
    # with --final same the test split is scored at every stage (a later stage overwrites
    # the checkpoint) but read only at the steps validation chose
    splits = ("val", "test") if final == "same" else ("val",)
    for step in steps:
        if not all((sel / f"{split}_step{step}.npz").is_file() for split in splits):
            train_to(recipe, sel, step, sel_sets)
            for split in splits:
                score_split(sel, split, step, seed)
        val[step] = read_terms(sel / f"val_step{step}.npz")
    trained_sigma = float(load_run(sel).cfg.model.llhd_sigma)
    choices = select(val, trained_sigma, SIGMAS, VARIANTS)   # validation only
    return final_test(recipe, out, digit, val_digit, seed, sets, base, final, choices, {})


def final_test(recipe: str, out: Path, digit: int, val_digit: int, seed: int, sets: list[str],
               base: list[str], final: str, choices: dict[str, Choice], extra: dict) -> dict:
    """Score the test split once per chosen step (step 3 of the module docstring) and write
    ``result.json``."""
    here = out / f"d{digit}" / f"s{seed}"
    test_run = here / ("select" if final == "same" else "final")
    result: dict = {"recipe": recipe, "digit": digit, "val_digit": val_digit, "seed": seed,
                    "final": final, "overrides": sets, "machine": machine_line(), **extra,
                    "variants": {}}
    for step in sorted({c.step for c in choices.values()}):
        path = test_run / f"test_step{step}.npz"
        if not path.is_file():
            train_to(recipe, test_run, step, base)
            score_split(test_run, "test", step, seed)
        terms, labels = read_terms(path)
        result.update(reference_auprcs(labels))
        result["prevalence"] = float(labels.double().mean())
        for c in (c for c in choices.values() if c.step == step):
            s = variant_scores(terms, c.variant, c.sigma)
            result["variants"][c.variant] = {**c.as_dict(), "test_auprc": auprc(s, labels),
                                              "test_auprc_trapezoid": auprc_trapezoid(s, labels)}
    runs = {"select": here / "select", "final": here / "final"}
    result["provenance"] = provenance({k: r for k, r in runs.items() if r.is_dir()})
    (here / "result.json").write_text(json.dumps(result, indent=1))
    return result


SCORING_KEYS = ("time_utc", "shortrun", "git", "torch", "cpu", "cpu_signature", "cpu_count",
                "torch_threads", "argv")
TRAINING_KEYS = ("event", "step", "time_utc", "git", "cpu", "cpu_signature", "torch_threads",
                 "routes")


def provenance(runs: dict[str, Path]) -> dict:
    """How a result was made: ``scoring`` (this process: commit and dirty flag, CPU, threads,
    command line; :func:`shortrun.train.provenance.provenance_entry`), ``training`` (per run,
    its ``train.threads`` and the entries its ``provenance.json`` recorded at each start and
    resume) and ``routes`` (this machine's route choices in the route cache after training)."""
    from shortrun.train.provenance import PROVENANCE, provenance_entry

    scoring = provenance_entry(step=-1)
    training = {}
    for name, run in runs.items():
        path = run / PROVENANCE
        entries = json.loads(path.read_text()) if path.is_file() else []
        training[name] = {"train_threads": read_config(run).train.threads,
                          "sessions": [{k: e[k] for k in TRAINING_KEYS if k in e}
                                       for e in entries]}
    return {"scoring": {k: scoring[k] for k in SCORING_KEYS}, "training": training,
            "routes": route_choices()}


def route_choices() -> dict:
    """This machine's entries of the route cache (key -> chosen route, threads, time), which
    every process on this machine reuses; ``{}`` when there is none."""
    try:
        from shortrun.speed import cache as routes
    except ImportError:  # a build without measured routes
        return {}
    path = routes.cache_path()
    try:
        return json.loads(path.read_text()).get(routes.machine_key(), {})
    except (OSError, ValueError, AttributeError):
        return {}


CURVE_VARIANTS = ("joint", "tilt", "unweighted")


def curve(out: Path, digit: int, seed: int) -> list[str]:
    """Rows ``step | val AP | test AUPRC`` per fixed-form variant at every stage the selection
    run scored (``--final same`` scores the test split at each). The test column is read after
    the fact, to show how far training has come; it chooses nothing."""
    sel = out / f"d{digit}" / f"s{seed}" / "select"
    steps = sorted(int(p.stem.removeprefix("val_step")) for p in sel.glob("val_step*.npz"))
    if not steps:
        return []
    sigma = float(read_config(sel).model.llhd_sigma)
    rows = []
    for step in steps:
        cells = []
        for split in ("val", "test"):
            path = sel / f"{split}_step{step}.npz"
            if not path.is_file():
                cells.append(["–"] * len(CURVE_VARIANTS))
                continue
            terms, labels = read_terms(path)
            metric = auprc if split == "val" else auprc_trapezoid
            cells.append([f"{metric(variant_scores(terms, v, sigma), labels):.3f}"
                          for v in CURVE_VARIANTS])
        pairs = [f"{a} / {b}" for a, b in zip(*cells, strict=True)]
        rows.append(f"| {digit} | {seed} | {step} | " + " | ".join(pairs) + " |")
    return rows


def split_of(recipe: str, overrides: list[str]) -> str:
    """The ``data.anomaly_split`` a run of ``recipe`` with ``overrides`` used."""
    from shortrun.train.config import resolve

    return str(resolve(recipe, list(overrides)).data.anomaly_split)


def mean_std(values: list[float]) -> str:
    a = np.asarray(values, dtype=np.float64)
    return f"{a.mean():.3f} ± {a.std(ddof=1):.3f}" if len(a) > 1 else f"{a.mean():.3f}"


def machine_line() -> str:
    from shortrun.hardware import cpu_flags, cpu_model, cpu_signature

    flags = sorted(f for f in cpu_flags() if f in {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    sig = cpu_signature()
    return (f"{cpu_model() or platform.processor()} ({', '.join(flags) or 'no AVX2'}"
            + (f"; {sig}" if sig else "") + "), "
            f"torch {torch.__version__}, {torch.get_num_threads()} threads")


def table(results: list[dict], metric: str) -> list[str]:
    head = ("| digit (val digit) | seeds | prevalence = random | worst | "
            + " | ".join(VARIANTS) + " | paper | successor |")
    lines = [head, "|" + "---|" * (len(VARIANTS) + 6)]
    worst_key = "auprc_trapezoid_worst" if metric.endswith("trapezoid") else "auprc_worst"

    def ref(values: dict[int, float], digit: int) -> str:
        return f"{values[digit]:.3f}" if digit in values else "–"

    for digit in sorted({r["digit"] for r in results}):
        rows = [r for r in results if r["digit"] == digit]
        cells = [mean_std([r["variants"][v][metric] for r in rows]) for v in VARIANTS]
        seeds = ",".join(str(r["seed"]) for r in rows)
        lines.append(f"| {digit} ({rows[0]['val_digit']}) | {seeds} | "
                     f"{rows[0]['prevalence']:.3f} | {rows[0][worst_key]:.3f} | "
                     + " | ".join(cells) + f" | {ref(PAPER, digit)} | {ref(SUCCESSOR, digit)} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--digits", default="1,4,5,7,9")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--recipe", choices=RECIPES, default=RECIPES[0],
                    help="the 2020 prior (default) or the diffusion-amortized prior (issue 19)")
    ap.add_argument("--out", type=Path, default=None,
                    help="default runs/lebm_anomaly_protocol, runs/damc_anomaly_protocol")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="recipe override for every run, e.g. train.steps=3000")
    ap.add_argument("--stages", type=int, default=4,
                    help="checkpoints to choose from, evenly spaced up to train.steps")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--val-digit-offset", type=int, default=1,
                    help="validation digit v(d) = (d + offset) %% 10")
    ap.add_argument("--final", choices=("retrain", "same"), default="retrain")
    ap.add_argument("--table", type=Path, default=None, help="also write the tables here")
    ap.add_argument("--collect", action="store_true",
                    help="train nothing: tabulate the finished seeds' result.json files")
    ap.add_argument("--choices-from", type=Path, default=None,
                    help="skip the selection run: test the choices recorded in "
                         "DIR/d{d}/s{s}/result.json by an earlier run with the same recipe, "
                         "seed and overrides (with --final retrain: train on the full "
                         "training split and score the test split at those steps)")
    ap.add_argument("--curve", action="store_true",
                    help="train nothing: validation AP and test AUPRC at every scored stage "
                         "(the test column is read after the fact and chooses nothing)")
    args = ap.parse_args()
    from shortrun.train.config import resolve

    if args.choices_from is not None and args.final == "same":
        raise SystemExit("--choices-from tests recorded choices on a retrained model; use it "
                         "with --final retrain (--final same needs the selection run itself)")
    out = args.out or Path("runs") / f"{args.recipe.split('_')[0]}_anomaly_protocol"
    total = resolve(args.recipe, args.overrides).train.steps
    steps = sorted({max(1, round(total * (k + 1) / args.stages)) for k in range(args.stages)})
    if args.curve:
        head = " | ".join(f"{v}: val AP / test AUPRC" for v in CURVE_VARIANTS)
        rows = [row for d in args.digits.split(",") for s in args.seeds.split(",")
                for row in curve(out, int(d), int(s))]
        if not rows:
            raise SystemExit(f"no scored stage under {out}: run without --curve first")
        print(f"| digit | seed | step | {head} |\n|{'---|' * (3 + len(CURVE_VARIANTS))}")
        print("\n".join(rows))
        return
    results = []
    for d in (int(v) for v in args.digits.split(",")):
        v = (d + args.val_digit_offset) % 10
        if v == d:
            raise SystemExit("--val-digit-offset must not map a digit to itself")
        for s in (int(v) for v in args.seeds.split(",")):
            if args.collect:
                done = out / f"d{d}" / f"s{s}" / "result.json"
                if done.is_file():
                    results.append(json.loads(done.read_text()))
                continue
            results.append(one_seed(args.recipe, out, d, v, s, steps, args.overrides,
                                    args.val_fraction, args.final, args.choices_from))
    if not results:
        raise SystemExit(f"no finished seed under {out}: run without --collect first")
    seeds = sorted({r["seed"] for r in results})
    if args.collect:
        finals = sorted({r.get("final", "not recorded") for r in results})
        where = sorted({r.get("machine", "not recorded") for r in results})
        splits = sorted({split_of(r["recipe"], r.get("overrides", [])) for r in results})
        header = (f"Recipe `{args.recipe}`, collected from {out}/d*/s*/result.json; seeds "
                  f"{seeds}; split: {', '.join(splits)}; final: {', '.join(finals)}; "
                  f"machines: {'; '.join(where)}.")
    else:
        header = (f"Recipe `{args.recipe}` {' '.join(args.overrides)}; checkpoints {steps}; "
                  f"seeds {seeds}; split: {split_of(args.recipe, args.overrides)}; "
                  f"final: {args.final}; {machine_line()}.")
    lines = [header, "",
             "Trapezoid AUPRC (the papers' formula), mean ± std over seeds; each variant's "
             "checkpoint (and σ′ for joint_sigma) chosen on validation AP:", "",
             *table(results, "test_auprc_trapezoid"), "", "Average precision (`auprc`):", "",
             *table(results, "test_auprc")]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.table is not None:
        args.table.write_text(text)


if __name__ == "__main__":
    main()
