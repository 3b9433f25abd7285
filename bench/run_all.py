"""``make bench``: the whole speed table of issue 16 in one run, written to
``bench/results/<cpu-model>-<vector-tier>-f<family>m<model>.md`` with the machine it ran on.

    SHORTRUN_DATA=/work/shared/data .venv/bin/python bench/run_all.py [--quick] [--out DIR]

Every row times shortrun and its reference in the same process, interleaved (A B A B …),
best of N, and states both; the ratio is "how many times better shortrun is" *on this
machine*. Rows: the LEBM iteration (1 and 2 threads, FLOPs counted per graph, % of the fp32
peak measured alongside), a CD-1 MNIST epoch and rbm_digits through the Trainer against
scikit-learn, Langevin throughput against a plain autograd loop (and ebmkit / TorchEBM when
importable), exact log Z with its float64 error, the GEMM peaks and the routes chosen.
About 6-10 minutes on 2 idle cores; ``--quick`` runs every row at toy sizes (a smoke test,
its times mean nothing).

The route cache is pointed at a fresh temporary folder (unless ``--keep-route-cache``), so
this run measures its own routes; the routes it chose are listed in the file.
"""

from __future__ import annotations

import argparse
import atexit
import datetime
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from speed_common import (  # noqa: E402
    Row,
    best,
    cpu_slug,
    interleave,
    load_average,
    machine_lines,
    spread,
    threads,
    timed,
)

LANGEVIN_NAME = "Langevin MLP 2-128-128-1"
PEAK_NAME = "GEMM peak"


def langevin_rows(thread_counts: list[int], repeats: int, quick: bool) -> list[Row]:
    """10,000 chains × 100 steps of Langevin on MLPEnergy(2, 128, 2, silu): shortrun's
    ``langevin`` against a plain ``autograd.grad`` loop over the same module (and the
    optional peers of bench/langevin_throughput.py)."""
    from langevin_throughput import make_ebmkit, make_torchebm, ours, plain_loop

    from shortrun.energies.mlp import MLPEnergy

    chains, steps = (500, 5) if quick else (10_000, 100)
    torch.manual_seed(0)
    energy = MLPEnergy(2, 128, 2, "silu")
    for q in energy.parameters():
        q.requires_grad_(True)
    x0 = torch.randn(chains, 2)
    samplers = {"shortrun": ours, "plain autograd loop": plain_loop}
    missing = []
    for name, make in (("ebmkit", make_ebmkit), ("TorchEBM", make_torchebm)):
        try:
            samplers[name] = make()
        except ImportError:
            missing.append(name)
    rows = []
    for n in thread_counts:
        runs = {k: timed(lambda f=f: f(energy, x0.clone(), steps)) for k, f in samplers.items()}
        with threads(n):
            times = interleave(runs, repeats)
        rate = {k: chains * steps / best(v) for k, v in times.items()}
        notes = [f"{k}: {r:,.0f} chain-steps/s ({spread(times[k])} s)" for k, r in rate.items()]
        if missing:
            notes.append("peers not installed here: " + ", ".join(missing))
        label = f"{n} thread{'s' if n > 1 else ''}"
        rows.append(Row(f"{LANGEVIN_NAME}, {label}", str(n), rate["shortrun"],
                        rate["plain autograd loop"], "plain autograd.grad loop, same module",
                        unit="chain-steps/s", higher_is_better=True,
                        target="≥ 1.5× plain loop", notes=notes, runs=times))
    return rows


def peak_rows(thread_counts: list[int]) -> list[Row]:
    """The GEMM peak per route (``shortrun info``'s probe) at each thread count."""
    from shortrun.info import PEAK_N, gemm_peaks

    rows = []
    for n in thread_counts:
        with threads(n):
            peaks = gemm_peaks()
        fp32 = {k: v for k, v in peaks.items() if "bf16" not in k}
        top = max(fp32, key=fp32.__getitem__)
        label = f"{n} thread{'s' if n > 1 else ''}"
        notes = [", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in peaks.items())]
        if "oneDNN bf16" not in peaks:
            notes.append("bf16 peak not measured: bf16 is not native on this CPU")
        rows.append(Row(f"{PEAK_NAME} {PEAK_N}^3 (fp32, fastest route {top}), {label}",
                        str(n), fp32[top], unit="GFLOP/s", higher_is_better=True, notes=notes))
    return rows


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "s":
        return f"{value:.3g} s"
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"


def markdown(rows: list[Row], header: list[str], routes: list[str], quick: bool) -> str:
    title = "make bench --quick (toy sizes: a smoke test, the times mean nothing)" if quick \
        else "make bench"
    out = [f"# {title}", "", *[f"- {line}" for line in header], "",
           "Ratios are shortrun against the reference *in this run on this CPU*; they do not",
           "carry to another machine. Each side is the best of its interleaved repeats.", "",
           "| row | threads | shortrun | reference (same run) | reference | shortrun better by "
           "| target |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r.ratio:.3g}×" if r.ratio is not None else "–"
        out.append(f"| {r.name} | {r.threads} | {fmt(r.ours, r.unit)} | {fmt(r.ref, r.unit)} "
                   f"| {r.ref_name} | {ratio} | {r.target} |")
    out += ["", "## Details", ""]
    for r in rows:
        out.append(f"- **{r.name}**")
        out += [f"  - {note}" for note in r.notes]
    out += ["", "## Routes chosen in this run (shortrun.speed, measured fresh)", ""]
    out += [f"- {line}" for line in routes] or ["- none measured"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="toy sizes, one repeat: smoke test")
    ap.add_argument("--out", default=str(HERE / "results"), help="folder of the results file")
    ap.add_argument("--repeats", type=int, default=None, help="repeats per row (default 3)")
    ap.add_argument("--keep-route-cache", action="store_true",
                    help="use the user's route cache instead of measuring routes afresh")
    args = ap.parse_args(argv)
    if not args.keep_route_cache:
        cache = tempfile.mkdtemp(prefix="shortrun-bench-cache-")
        atexit.register(shutil.rmtree, cache, ignore_errors=True)
        os.environ["XDG_CACHE_HOME"] = cache
    from shortrun.speed import engine as routes

    started, load_start = time.perf_counter(), load_average()
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    default = torch.get_num_threads()
    counts = sorted({1, min(2, os.cpu_count() or 1)})
    rep = args.repeats or (1 if args.quick else 3)
    quick = args.quick
    from speed_lebm import lebm_rows
    from speed_rbm import cd1_rows, digits_rows, logz_rows

    both = sorted({default, 1}, reverse=True)
    stages = [("GEMM peaks", lambda: peak_rows(counts)),
              ("LEBM", lambda: lebm_rows(counts, rep if quick else max(2, rep - 1),
                                         batch=2 if quick else 100,
                                         chain_steps=(2, 2) if quick else (60, 20))),
              ("CD-1 MNIST", lambda: cd1_rows(both, default, rep, quick)),
              ("rbm_digits", lambda: digits_rows(default, rep, quick)),
              ("Langevin", lambda: langevin_rows(counts, rep if quick else rep + 2, quick)),
              ("exact log Z", lambda: logz_rows(both, default, rep, quick))]
    rows: list[Row] = []
    for stage, run in stages:
        print(f"[{time.perf_counter() - started:6.0f} s] {stage} …", file=sys.stderr, flush=True)
        rows += run()
    wall = time.perf_counter() - started
    command = "python " + " ".join(shlex.quote(a) for a in [
        "bench/run_all.py", *(sys.argv[1:] if argv is None else argv)])
    header = [*machine_lines(), f"date: {date}", f"command: `{command}`",
              f"load average (1/5/15 min) at start: {load_start}; at end: {load_average()}",
              f"wall time of the whole run: {wall:.0f} s",
              f"SHORTRUN_AUTHORS_LEBM: {os.environ.get('SHORTRUN_AUTHORS_LEBM') or 'not set'}"]
    chosen = [f"{key}: {entry['name']} (size rule)" if entry.get("rule") else
              f"{key}: {entry['name']} (measured µs: "
              + ", ".join(f"{k} {v:g}" for k, v in entry.get("us", {}).items()) + ")"
              for key, entry in routes.remembered().items()]
    from shortrun.info import info_lines

    chosen += [f"`shortrun info`: {line}" for line in info_lines() if line.startswith("route")]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{cpu_slug()}{'-quick' if quick else ''}.md"
    path.write_text(markdown(rows, header, chosen, quick))
    print(path.read_text())
    print(f"written: {path}")
    return path


if __name__ == "__main__":
    main()
