"""What each measured route family gains over plain torch, on the workload that uses it, at the
same thread count, every candidate interleaved in one process (issue 42, "Keep only what pays").

    SHORTRUN_DATA=/work/shared/data .venv/bin/python bench/route_gains.py \
        [--parts cd1,langevin,generator,lebm] [--threads 1,2] [--rounds 5]

Parts and the families they measure (``shortrun.speed.engine.FAMILIES``):

- ``cd1``: one CD-1 update (``training_step``) at MNIST size (784 × 500, batch 100) and digits
  size (64 × 64 and 64 × 100, batch 10): ``rbm_step`` (the NumPy step against the torch step,
  whose products are ``torch.addmm``).
- ``langevin``: one Langevin step of the 2-128-128-1 SiLU ``MLPEnergy`` on 10,000 and 256
  chains: no family (the ``mlp`` family was deleted); the hand-written ``energy_and_grad`` pass
  against the plain autograd step.
- ``generator``: one posterior-chain step of the ``lebm_mnist`` and ``lebm_svhn`` generators,
  forward plus the gradient in z, batch 100: ``conv`` (NHWC) and ``deconv`` (GEMM first layer,
  GEMM + col2im last layer).
- ``lebm``: the whole ``lebm_svhn`` iteration (batch 100, K0 = 60, K1 = 20) with every route
  plain (NCHW, transposed convolutions), with ``train.routes=fixed`` and with the routes chosen
  by measurement, against the official formulation (bench/lebm_speed.py): how much of the lead
  is the graph and how much the routes.

"plain torch" is every family on plain torch (``SHORTRUN_ROUTE_<FAMILY>`` pins: the torch
step, NCHW, the transposed convolution). A candidate differs from its baseline in
one family. "fixed" is ``train.routes=fixed``; "auto" the routes the engine chose in this
process from an empty route cache (its race ran under the same load).
A route a pin cannot name (``numpy@1``) is set by replaying a record
(``train.routes: RUN_DIR``). Each round runs every candidate once as a block of calls, in an
order rotated from round to round; a candidate switched by pin or record runs one untimed call
first. Reported: the median time per call over the rounds and its range; the gain = the
baseline's time / the candidate's, round by round (the two blocks ran seconds apart), median and
range. The machine may be shared: read the gains, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from route_race import BASE, Cand, chosen, race, replay_file, summary, use_routes

PARTS = ("cd1", "langevin", "generator", "lebm")
PLAIN = {"rbm_step": "torch", "conv": "nchw", "deconv": "conv"}


# ----------------------------------------------------------------------------- workloads
def rbm_data(nv: int, batch: int, n_batches: int):
    import numpy as np
    import torch

    root = Path(os.environ.get("SHORTRUN_DATA", "/nonexistent"))
    if nv == 784 and (root / "mnist.npz").is_file():
        with np.load(root / "mnist.npz") as f:
            x = (f["x_train"][:batch * n_batches].reshape(-1, 784) > 127.5).astype(np.float32)
        src = "MNIST train images, binarised at 127.5"
        return list(torch.from_numpy(x).split(batch)), src
    try:
        from sklearn.datasets import load_digits

        x = (load_digits().data[:, :nv] > 8).astype(np.float32) if nv == 64 else None
    except ImportError:
        x = None
    if x is not None:
        x = np.resize(x, (batch * n_batches, nv))
        return list(torch.from_numpy(x).split(batch)), "scikit-learn digits, binarised at 8"
    g = torch.Generator().manual_seed(0)
    return list((torch.rand(batch * n_batches, nv, generator=g) < 0.2).float().split(batch)), \
        "Bernoulli(0.2) pixels (no data found)"


def rbm_step_fn(nv: int, nh: int, batches):
    """A CD-1 ``training_step`` closure on its own model (the same initialisation each time)."""
    import torch

    from shortrun.data.base import DataInfo, LoadedData
    from shortrun.models.base import OptimOptions
    from shortrun.models.rbm import BernoulliRBM
    from shortrun.train.config import build_config

    cfg = build_config({"data": {"name": "mnist", "binarize": 0.5},
                        "model": {"name": "rbm", "n_hidden": nh, "learning": "cd", "k": 1},
                        "train": {"epochs": 1, "batch_size": len(batches[0]), "lr": 0.01}})
    info = DataInfo(shape=(nv,), kind="binary", low=0.0, high=1.0)
    torch.manual_seed(0)
    model = BernoulliRBM.from_config(cfg.model, info)
    model.on_train_start(LoadedData(train=torch.cat(batches), info=info))
    opts = model.configure_training(OptimOptions.from_train(cfg.train))
    step = [0]

    def run() -> None:
        model.training_step(batches[step[0] % len(batches)], step[0], opts)
        step[0] += 1
    return run


def cd1(threads: int, rounds: int, quick: bool) -> list[dict]:
    sizes = [(784, 500, 100, 10), (64, 64, 10, 100), (64, 100, 10, 100)]
    if quick:
        sizes = [(64, 16, 10, 5)]
    out = []
    for nv, nh, batch, calls in sizes:
        batches, src = rbm_data(nv, batch, 20)
        auto = Cand("auto", rbm_step_fn(nv, nh, batches))
        use_routes({}, "auto")
        auto.fn()  # the engine's choice of rbm_step (a size rule: nothing is raced)
        cands = [Cand(BASE, rbm_step_fn(nv, nh, batches), pins=dict(PLAIN)),
                 Cand("fixed", rbm_step_fn(nv, nh, batches), policy="fixed")]
        # rbm_step is chosen by a size rule, never raced: its candidates are named here (numpy@1
        # by replaying the key the auto run settled, as a pin cannot name it)
        seen = chosen("rbm_step|")
        cands.append(Cand("rbm_step numpy", rbm_step_fn(nv, nh, batches), "rbm_step",
                          pins={**PLAIN, "rbm_step": "numpy"}))
        if threads > 1:
            one = replay_file({k: "numpy@1" for k in seen})
            cands.append(Cand("rbm_step numpy@1", rbm_step_fn(nv, nh, batches), "rbm_step",
                              pins={f: r for f, r in PLAIN.items() if f != "rbm_step"},
                              policy=one))
        cands.append(auto)
        times = race(cands, rounds, calls)
        out.append(summary(f"CD-1 update {nv}x{nh}, batch {batch} ({src})", threads, cands,
                           times, calls, seen))
    return out


def langevin_part(threads: int, rounds: int, quick: bool) -> list[dict]:
    import torch

    from shortrun.energies.mlp import MLPEnergy
    from shortrun.samplers.langevin import langevin

    out = []
    for rows, calls in ([(512, 5)] if quick else [(10_000, 10), (256, 100)]):
        torch.manual_seed(0)
        energy = MLPEnergy(2, 128, 2)

        def stepper(fast: bool, energy=energy, rows=rows):
            x = [torch.randn(rows, 2) * 2]
            fn = energy if fast else energy.forward  # a plain callable: the autograd step

            def run() -> None:
                x[0] = langevin(fn, x[0], 1, 0.01)[0]
            return run

        cands = [Cand(BASE, stepper(True), pins=dict(PLAIN)),
                 Cand("autograd step (no energy_and_grad)", stepper(False), pins=dict(PLAIN))]
        times = race(cands, rounds, calls)
        out.append(summary(f"Langevin step, MLP 2-128-128-1 (SiLU), {rows:,} chains", threads,
                           cands, times, calls, {}))
    return out


def settling(model, batch: int, fn):
    """``fn``, whose first call first hands ``model``'s ``channels_last: auto`` generator its
    layout, under the candidate's routes, as the Trainer does before a run's first step."""
    from shortrun.speed.layout import settle_layouts

    pending = [True]

    def call():
        if pending:
            settle_layouts(model, batch)
            pending.clear()
        return fn()
    return call


def generator_part(threads: int, rounds: int, quick: bool) -> list[dict]:
    import torch

    from shortrun.models.lebm_nets import SHAPES, Generator
    from shortrun.speed.deconv import RoutedTransposedConv
    from shortrun.speed.layout import chain_step

    nets = [("lebm_mnist", "mnist28", 32, 16, 100, 5), ("lebm_svhn", "svhn32", 100, 64, 100, 2)]
    if quick:
        nets = [("lebm_mnist", "mnist28", 8, 4, 4, 1)]
    out = []
    for recipe, kind, nz, ngf, batch, calls in nets:
        g = torch.Generator().manual_seed(0)
        z = torch.randn(batch, nz, generator=g)
        target = torch.rand(batch, *SHAPES[kind], generator=g) * 2 - 1

        def step_on(layout, fast_layers=False, kind=kind, nz=nz, ngf=ngf, z=z, target=target):
            torch.manual_seed(0)
            net = Generator(kind, nz, ngf, {"nchw": False, "nhwc": True}.get(layout, "auto"))
            if fast_layers:  # each routed layer settles on its own product route
                for m in net.modules():
                    if isinstance(m, RoutedTransposedConv):
                        m.register_forward_pre_hook(
                            lambda mod, _: os.environ.__setitem__("SHORTRUN_ROUTE_DECONV",
                                                                  mod.FAST))
            return settling(net, len(z), lambda: chain_step(net, z, target))

        auto = Cand("auto", step_on("auto"), switch=False)
        use_routes({}, "auto")
        auto.fn()
        nhwc = "conv nhwc (= fixed)"
        cands = [Cand(BASE, step_on("nchw"), pins=dict(PLAIN), switch=False),
                 Cand(nhwc, step_on("nhwc"), "conv", pins=dict(PLAIN), switch=False),
                 Cand("deconv gemm+fold, nchw", step_on("nchw", True), "deconv",
                      pins=dict(PLAIN), switch=False),
                 Cand("deconv gemm (first layer), nchw", step_on("nchw"), "deconv",
                      pins={**PLAIN, "deconv": "gemm"}, switch=False),
                 Cand("deconv fold (last layer), nchw", step_on("nchw"), "deconv",
                      pins={**PLAIN, "deconv": "fold"}, switch=False),
                 Cand("deconv gemm+fold, nhwc", step_on("nhwc", True), "deconv", base=nhwc,
                      pins=dict(PLAIN), switch=False),
                 auto]
        seen = {**chosen("conv|"), **chosen("deconv|")}
        times = race(cands, rounds, calls)
        out.append(summary(f"{recipe} generator chain step (forward + ∇z), batch {batch}",
                           threads, cands, times, calls, seen))
    return out


def lebm_part(threads: int, rounds: int, quick: bool) -> list[dict]:
    import torch
    from lebm_speed import SVHN, reference_iteration, reference_nets

    from shortrun.models.base import OptimOptions
    from shortrun.models.registry import build_model
    from shortrun.train.config import resolve

    batch, k0, k1 = (4, 2, 2) if quick else (100, 60, 20)
    torch.manual_seed(0)
    x = torch.rand(batch, 3, 32, 32) * 2 - 1
    g, e = reference_nets()
    adam = {"betas": (0.5, 0.999)}
    opt_g, opt_e = (torch.optim.Adam(g.parameters(), 1e-4, **adam),
                    torch.optim.Adam(e.parameters(), 2e-5, **adam))

    def ours(*overrides: str):
        cfg = resolve("lebm_svhn", [f"train.batch_size={batch}", f"model.prior_steps={k0}",
                                    f"model.post_steps={k1}", *overrides])
        torch.manual_seed(0)
        model = build_model(cfg, SVHN)
        opts = model.configure_training(OptimOptions.from_train(cfg.train))
        return settling(model, batch, lambda: model.training_step(x, 0, opts))

    ref = "official formulation"
    # each side settles its routes at its first (untimed) call and keeps them in its layers
    cands = [Cand(ref, lambda: reference_iteration(g, e, opt_g, opt_e, x, k0=k0, k1=k1),
                  base=ref, switch=False),
             Cand(BASE, ours("model.channels_last=false"), base=ref, pins=dict(PLAIN),
                  switch=False),
             Cand("fixed", ours(), base=ref, policy="fixed", switch=False),
             Cand("auto", ours(), base=ref, switch=False)]
    times = race(cands, rounds, 1)
    seen = {**chosen("conv|"), **chosen("deconv|")}
    return [summary(f"lebm_svhn iteration, batch {batch}, K0={k0}, K1={k1}", threads, cands,
                    times, 1, seen)]


RUNNERS = {"cd1": cd1, "langevin": langevin_part, "generator": generator_part,
           "lebm": lebm_part}


# ----------------------------------------------------------------------------- main
def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default=",".join(PARTS[:3]),
                    help=f"comma-separated, of {', '.join(PARTS)} (default: the first three)")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (lebm: 3)")
    ap.add_argument("--json", type=Path, default=Path("runs/route_gains.json"),
                    help="results, merged into this file run by run")
    ap.add_argument("--report", type=Path, default=None,
                    help="write the Markdown report here (default: bench/results/"
                         "route-gains-<cpu>.md; '-' for none)")
    ap.add_argument("--tag", default="", help="a label for this run in the JSON and the report "
                    "(a run of the same parts and threads without one replaces the earlier)")
    ap.add_argument("--quick", action="store_true", help="toy sizes (the times mean nothing)")
    args = ap.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts:
        ap.error(f"--parts: unknown {', '.join(bad) or '(empty)'}; use any of {', '.join(PARTS)}")
    try:
        counts = [int(t) for t in args.threads.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        ap.error(f"--threads {args.threads}: give positive integers, e.g. 1,2")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    args.parts, args.thread_counts = parts, counts
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    # an empty route cache: the engine's choices are made here, under this run's load
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="route-gains-cache-")
    from route_gains_report import render
    from speed_common import cpu_slug, load_average, machine_lines, threads

    data = json.loads(args.json.read_text()) if args.json.is_file() else {"parts": {}}
    data["machine"] = machine_lines()
    data["slug"] = cpu_slug()
    for part in args.parts:
        key = f"{part}, {'/'.join(map(str, args.thread_counts))} thread(s)"
        entry = {"load_before": load_average(), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                        time.gmtime()),
                 "commit": commit(), "command": " ".join(["python", *sys.argv]),
                 "quick": args.quick, "workloads": []}
        t0 = time.perf_counter()
        rounds = min(args.rounds, 3) if part == "lebm" else args.rounds
        for n in args.thread_counts:
            with threads(n):
                entry["workloads"] += RUNNERS[part](n, rounds, args.quick)
            print(f"{part}: {n} thread(s) done, load {load_average()}", flush=True)
            # written after each thread count, so an interrupted run keeps what it measured
            entry["load_after"], entry["wall_s"] = load_average(), time.perf_counter() - t0
            data["parts"][key + (f", {args.tag}" if args.tag else "")] = entry
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(data, indent=1))
    report = args.report or Path(__file__).parent / "results" / f"route-gains-{data['slug']}.md"
    text = render(data)
    print(text)
    if str(report) != "-":
        report.write_text(text)


if __name__ == "__main__":
    main()
