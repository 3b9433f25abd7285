"""Command line: ``shortrun recipes | config | train | sample | eval | diagnose | report | info``,
``--version``.

Every user error is one line on stderr and an exit code (2: bad config or options;
1: missing data, bad checkpoint; 3: training diverged) — never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from shortrun.errors import ConfigError, ShortrunError, TrainingInterrupted

if TYPE_CHECKING:
    from shortrun.run import LoadedRun


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own errors: exit 2, one line
        raise ConfigError(f"{message} (see `{self.prog} --help`)")


def version_text() -> str:
    """``shortrun 0.1.0 from DIR (torch X, Python Y)``: what ``shortrun --version`` prints."""
    import platform

    import torch

    import shortrun

    where = Path(shortrun.__file__).resolve().parent
    return (f"shortrun {shortrun.__version__} from {where} "
            f"(torch {torch.__version__}, Python {platform.python_version()})")


class _VersionAction(argparse.Action):
    """``--version`` that imports torch only when asked (``recipes`` stays fast)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print shortrun's and torch's versions and exit")

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="shortrun", description="Train, sample and evaluate energy-based models.")
    p.add_argument("--version", action=_VersionAction)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("recipes", help="list the built-in recipes")

    c = sub.add_parser("config", help="every key of a recipe's resolved config: type, bounds, "
                       "value, default and doc")
    c.add_argument("recipe", nargs="?", help="built-in recipe name or a YAML file")
    c.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, as for `shortrun train`")
    c.add_argument("--format", choices=("table", "yaml"), default="table",
                   help="table: keys with type, bounds, default and doc (default); yaml: the "
                   "resolved values alone, a recipe file `shortrun train` accepts")

    t = sub.add_parser("train", help="train a recipe (default: the demo recipe)")
    t.add_argument("recipe", nargs="?", help="built-in recipe name or a YAML file")
    t.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set train.lr=1e-4 (repeatable)")
    t.add_argument("--out", type=Path, help="run directory (default runs/RECIPE-TIME)")
    t.add_argument("--resume", type=Path, metavar="DIR", help="continue the run in DIR")
    _data_dir(t)

    s = sub.add_parser("sample", help="draw samples from a trained run")
    s.add_argument("run_dir", type=Path)
    s.add_argument("--n", type=int, default=None, help="number of samples (default sample.n)")
    s.add_argument("--out", type=Path, help="FILE.npz (key x, data scale; token ids for text), "
                   "FILE.png (images, 2-D points) or FILE.txt (text: one sentence a line)")
    s.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    s.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    s.add_argument("--class", dest="label", type=int, default=None, metavar="Y",
                   help="samples of class Y, p(x|y) (jem; ebm with --classifier)")
    s.add_argument("--guidance", type=float, default=None, metavar="W",
                   help="with --class: Langevin on E(x) - (1+W) log p(y|x); 0 is exact p(x|y) "
                        "(default: the run's model.guidance, else 0)")
    s.add_argument("--classifier", type=Path, default=None, metavar="RUN",
                   help="with --class on an ebm run: a classifier or jem run on the same data, "
                        "whose p(y|x) picks the class")
    _data_dir(s)

    e = sub.add_parser("eval", help="evaluate a trained run; writes RUN_DIR/eval.json")
    e.add_argument("run_dir", type=Path)
    e.add_argument("--metrics", default=None, help="comma-separated metric names")
    e.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    _data_dir(e)

    d = sub.add_parser("diagnose", help="draw long chains from a trained run: ESS, split-R̂ and "
                       "acceptance of every chain (RUN_DIR/eval.json, chains.npz, chains.png)")
    d.add_argument("run_dir", type=Path)
    d.add_argument("--chains", type=int, default=None, help="chains per kind (default 4)")
    d.add_argument("--steps", type=int, default=None, help="steps per chain (default 400)")
    d.add_argument("--warmup", type=float, default=None,
                   help="fraction of every chain dropped before the diagnostics (default 0.5)")
    d.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    _data_dir(d)

    r = sub.add_parser("report", help="write an HTML report of a run (RUN_DIR/report/)")
    r.add_argument("run_dir", type=Path)
    r.add_argument("--out", type=Path, help="folder for index.html and its PNGs")
    r.add_argument("--force", action="store_true",
                   help="write into an --out folder that already has files")

    i = sub.add_parser("info", help="this machine and build: CPU model and flags, threads, "
                       "BLAS/oneDNN, measured GEMM peak, bf16, the product routes (~1 s)")
    i.add_argument("--threads", type=int, default=None,
                   help="torch threads to measure with (default: torch's own)")
    i.add_argument("--retime", action="store_true",
                   help="drop this machine's cached route choices first, so that every route "
                        "is timed afresh (for a choice measured while the machine was busy)")
    return p


def _data_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", type=Path, help="folder laid out like shared/data "
                   "(default $SHORTRUN_DATA)")


def _apply_data_dir(args: argparse.Namespace) -> None:
    if getattr(args, "data_dir", None) is not None:
        os.environ["SHORTRUN_DATA"] = str(args.data_dir)


def cmd_recipes(args: argparse.Namespace) -> int:
    from shortrun.train.config import DEFAULT_RECIPE, list_recipes

    rows = list_recipes()
    width = max((len(n) for n, _ in rows), default=0)
    for name, desc in rows:
        mark = " (default)" if name == DEFAULT_RECIPE else ""
        print(f"{name:<{width}}  {desc}{mark}")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from shortrun.train.config import resolve
    from shortrun.train.schema import describe, values_yaml

    cfg = resolve(args.recipe, args.overrides)
    print(values_yaml(cfg) if args.format == "yaml" else describe(cfg), end="")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from shortrun.train.config import resolve
    from shortrun.train.rundir import default_run_dir, read_config
    from shortrun.train.trainer import Trainer

    _apply_data_dir(args)
    if args.resume is not None:
        if args.recipe:
            raise ConfigError("give either a recipe or --resume DIR, not both (a resumed run "
                              "keeps its own config; change values with --set)")
        cfg = read_config(args.resume, args.overrides)
        trainer = Trainer(cfg, args.resume, resume=True)
    else:
        cfg = resolve(args.recipe, args.overrides)
        trainer = Trainer(cfg, args.out or default_run_dir(cfg.recipe))
    try:
        result = trainer.fit()
    finally:
        trainer.close()
    if trainer.dist.is_main:
        shown = ", ".join(f"{k}={v:.4g}" for k, v in list(result.metrics.items())[:6])
        print(f"trained {cfg.recipe or cfg.model.name} to step {result.step}: {shown}")
        print(f"run directory: {result.run_dir}")
    return 0


def _refuse_overwrite(out: Path | None, force: bool) -> None:
    """An explicit ``--out`` never replaces what is already there unless ``--force``.

    (The defaults inside the run directory, ``samples.npz`` and ``report/``, are the run's own
    derived files and are rewritten.) An empty folder holds nothing to lose.
    """
    if out is None or force or not out.exists():
        return
    if out.is_dir() and not any(out.iterdir()):
        return
    kind = "folder" if out.is_dir() else "file"
    raise ConfigError(f"--out {out}: that {kind} already exists; pass --force to overwrite it "
                      "or choose another --out")


def cmd_sample(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from shortrun.evaluation.sampling import sample_in_chunks
    from shortrun.plotting import save_samples
    from shortrun.run import load_run

    _apply_data_dir(args)
    if args.n is not None and args.n <= 0:
        raise ConfigError(f"--n must be a positive integer; got {args.n}")
    if args.out is not None and args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a folder; give a file name in it, e.g. "
                          f"--out {args.out / 'samples.npz'}")
    _refuse_overwrite(args.out, args.force)
    run = load_run(args.run_dir, args.overrides)
    n = args.n or run.cfg.sample.n
    out = args.out or (args.run_dir / "samples.npz")
    if out.suffix not in (".npz", ".png", ".txt"):
        raise ConfigError(f"--out {out}: the file must end in .npz or .png "
                          "(or .txt for text models)")
    text = run.model.info.kind == "text"
    if text and out.suffix == ".png":
        raise ConfigError(f"--out {out}: {args.run_dir} is a text model ({run.cfg.model.name}); "
                          "use --out FILE.txt (one sentence a line) or FILE.npz (token ids)")
    if not text and out.suffix == ".txt":
        raise ConfigError(f"--out {out}: .txt is for text models; {args.run_dir} is a "
                          f"{run.model.info.kind} model ({run.cfg.model.name}), use FILE.png "
                          "or FILE.npz")
    given = class_keywords(args, run)
    torch.manual_seed(run.cfg.sample.seed)
    x = sample_in_chunks(lambda k: run.model.sample(k, **given), n, run.cfg.sample.batch_size)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".npz":
        np.savez(out, x=(x if text else run.to_data_scale(x)).numpy())
    elif out.suffix == ".txt":
        from shortrun.metrics.text import write_sentences

        write_sentences(x, run.cfg.data, out)
    else:
        save_samples(x, run.model.info, out)
    of_class = "" if args.label is None else f" of class {args.label}"
    print(f"wrote {n} samples{of_class} to {out}")
    return 0


def class_keywords(args: argparse.Namespace, run: LoadedRun) -> dict[str, object]:
    """``--class`` / ``--guidance`` / ``--classifier`` as keywords of the model's ``sample``
    (``y=``, ``guidance=``, ``classifier=``), checked against what that ``sample`` takes."""
    import inspect

    from shortrun.run import load_run

    if args.label is None:
        for flag, value in (("--guidance", args.guidance), ("--classifier", args.classifier)):
            if value is not None:
                raise ConfigError(f"{flag} steers class-conditional samples: add --class Y, or "
                                  f"drop {flag} for unconditional samples")
        return {}
    takes = inspect.signature(run.model.sample).parameters
    name = run.cfg.model.name
    if "y" not in takes:
        raise ConfigError(f"--class {args.label}: {args.run_dir} (model {name}) has no "
                          "classes; class-conditional samples come from a jem run, or an ebm run "
                          "with --classifier RUN; drop --class for unconditional samples")
    given: dict[str, object] = {"y": args.label}
    if args.guidance is not None:
        if "guidance" not in takes:
            raise ConfigError(f"--guidance: {args.run_dir} (model {name}) samples p(x|y) "
                              "without guidance; drop --guidance")
        if args.guidance < 0:
            raise ConfigError(f"--guidance {args.guidance}: must be >= 0 (0 samples p(x|y) "
                              "exactly; larger values sharpen the class)")
        given["guidance"] = args.guidance
    judge = run
    if "classifier" in takes:
        if args.classifier is None:
            raise ConfigError(f"--class {args.label}: {args.run_dir} (model {name}) has no "
                              "classes of its own; add --classifier RUN, a classifier or jem run "
                              "trained on the same data, whose p(y|x) picks the class")
        judge = load_run(args.classifier)
        if getattr(judge.model.options, "n_classes", None) is None:
            raise ConfigError(f"--classifier {args.classifier}: its model "
                              f"({judge.cfg.model.name}) gives no class probabilities; use a "
                              "classifier or jem run")
        if judge.model.info.to_dict() != run.model.info.to_dict():
            raise ConfigError(f"--classifier {args.classifier}: it was trained on data of shape "
                              f"{tuple(judge.model.info.shape)} in [{judge.model.info.low}, "
                              f"{judge.model.info.high}], {args.run_dir} on shape "
                              f"{tuple(run.model.info.shape)} in [{run.model.info.low}, "
                              f"{run.model.info.high}]; use a classifier trained on the same "
                              "data and data.scale")
        given["classifier"] = judge.model
    elif args.classifier is not None:
        raise ConfigError(f"--classifier: {args.run_dir} (model {name}) is its own "
                          "classifier; drop --classifier")
    classes = getattr(judge.model.options, "n_classes", None)
    if classes is not None and not 0 <= args.label < classes:
        raise ConfigError(f"--class {args.label}: the classes are 0..{classes - 1}")
    return given


def cmd_eval(args: argparse.Namespace) -> int:
    from shortrun.evaluation.dispatch import EVAL_FILE, evaluate_run, table_lines
    from shortrun.evaluation.progress import Progress
    from shortrun.run import load_run

    _apply_data_dir(args)
    run = load_run(args.run_dir, args.overrides)
    requested = [m.strip() for m in (args.metrics or "").split(",") if m.strip()]
    results = evaluate_run(run, requested, progress=Progress())
    for line in table_lines(results):
        print(line)
    print(f"wrote {args.run_dir / EVAL_FILE}")
    return 0


def cmd_diagnose(args: argparse.Namespace) -> int:
    from shortrun.data.registry import load_data
    from shortrun.evaluation import chains
    from shortrun.evaluation.dispatch import EVAL_FILE, merge_eval_json
    from shortrun.run import load_run

    _apply_data_dir(args)
    n = chains.CHAINS if args.chains is None else args.chains
    steps = chains.STEPS if args.steps is None else args.steps
    warmup = chains.WARMUP if args.warmup is None else args.warmup
    run = load_run(args.run_dir, args.overrides)
    data = load_data(run.cfg.data)
    out = chains.diagnose(run.model, data, n, steps, warmup, args.run_dir, run.cfg.eval.seed)
    for line in chains.table(out):
        print(line)
    merge_eval_json(args.run_dir / EVAL_FILE, out, run.step)
    written = [p.name for p in (args.run_dir / chains.TRACE_FILE, args.run_dir / chains.PLOT_FILE)
               if p.is_file()]
    print(f"wrote {args.run_dir / EVAL_FILE} and {', '.join(written)}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from shortrun.report import frechet_lines, write_report

    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a file; report --out names a folder (it gets "
                          "index.html and its PNGs)")
    _refuse_overwrite(args.out, args.force)
    print(f"wrote {write_report(args.run_dir, args.out)}")
    for line in frechet_lines(args.run_dir):
        print(line)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    import torch

    from shortrun.info import info_lines

    if args.threads is not None:
        if args.threads < 1:
            raise ConfigError(f"--threads {args.threads}: use a count of 1 or more")
        torch.set_num_threads(args.threads)
    if args.retime:
        from shortrun.speed import engine as routes

        dropped = routes.forget_machine()
        print(f"route cache: dropped this machine's {dropped} cached choice"
              f"{'' if dropped == 1 else 's'}; every route is timed afresh", flush=True)
    for line in info_lines():
        print(line, flush=True)
    return 0


COMMANDS = {"recipes": cmd_recipes, "config": cmd_config, "train": cmd_train,
            "sample": cmd_sample, "eval": cmd_eval, "diagnose": cmd_diagnose,
            "report": cmd_report, "info": cmd_info}


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except TrainingInterrupted as exc:  # a stop the user asked for, not an error
        print(f"shortrun: {exc}", file=sys.stderr)
        return exc.exit_code
    except ShortrunError as exc:
        print(f"shortrun: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # outside the training loop, or a second Ctrl-C inside it
        print("shortrun: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # a path the user gave cannot be read or written
        what = f"{exc.strerror or type(exc).__name__}: {exc.filename}" if exc.filename \
            else str(exc) or type(exc).__name__
        print(f"shortrun: error: {what}; check the path and its permissions", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
