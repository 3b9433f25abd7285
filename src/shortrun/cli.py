"""Command line: ``shortrun recipes | train | sample | eval | report``.

Every user error is one line on stderr and an exit code (2: bad config or options;
1: missing data, bad checkpoint; 3: training diverged) — never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from shortrun.errors import ConfigError, ShortrunError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own errors: exit 2, one line
        raise ConfigError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="shortrun", description="Train, sample and evaluate energy-based models.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("recipes", help="list the built-in recipes")

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
    _data_dir(s)

    e = sub.add_parser("eval", help="evaluate a trained run; writes RUN_DIR/eval.json")
    e.add_argument("run_dir", type=Path)
    e.add_argument("--metrics", default=None, help="comma-separated metric names")
    e.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    _data_dir(e)

    r = sub.add_parser("report", help="write an HTML report of a run (RUN_DIR/report/)")
    r.add_argument("run_dir", type=Path)
    r.add_argument("--out", type=Path, help="folder for index.html and its PNGs")
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


def cmd_sample(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from shortrun.plotting import save_samples
    from shortrun.run import load_run

    _apply_data_dir(args)
    if args.n is not None and args.n <= 0:
        raise ConfigError(f"--n must be a positive integer; got {args.n}")
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
    torch.manual_seed(run.cfg.sample.seed)
    chunks = []
    bs = run.cfg.sample.batch_size
    for i in range(0, n, bs):
        chunks.append(run.model.sample(min(bs, n - i)).detach().cpu())
    x = torch.cat(chunks)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".npz":
        np.savez(out, x=(x if text else run.to_data_scale(x)).numpy())
    elif out.suffix == ".txt":
        from shortrun.metrics.text import write_sentences

        write_sentences(x, run.cfg.data, out)
    else:
        save_samples(x, run.model.info, out)
    print(f"wrote {n} samples to {out}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    import torch

    from shortrun.data.registry import load_data
    from shortrun.run import load_run

    _apply_data_dir(args)
    run = load_run(args.run_dir, args.overrides)
    requested = [m.strip() for m in (args.metrics or "").split(",") if m.strip()]
    metrics = run.model.check_metrics(requested or run.cfg.eval.metrics, run.cfg)
    data = load_data(run.cfg.data)
    torch.manual_seed(run.cfg.eval.seed)
    results = run.model.evaluate(metrics, data, args.run_dir, run.cfg)
    path = args.run_dir / "eval.json"
    previous = json.loads(path.read_text()) if path.is_file() else {}
    previous.update(results)
    previous["step"] = run.step
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(previous, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    width = max(len(k) for k in results) if results else 0
    print(f"{'metric':<{width}}  value")
    for key, value in results.items():
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {shown}")
    print(f"wrote {path}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from shortrun.report import write_report

    print(f"wrote {write_report(args.run_dir, args.out)}")
    return 0


COMMANDS = {"recipes": cmd_recipes, "train": cmd_train, "sample": cmd_sample, "eval": cmd_eval,
            "report": cmd_report}


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except ShortrunError as exc:
        print(f"shortrun: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("shortrun: interrupted; the last checkpoint is intact", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
