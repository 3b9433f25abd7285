"""``make bench`` rows for the LEBM: one ``lebm_svhn`` iteration at the official defaults, shortrun
against the official formulation (bench/lebm_speed.py's reference loop), side by side.

FLOPs are counted by torch.utils.flop_counter on *each* graph separately (bench/flops.py), so
a variant that does less arithmetic shows fewer FLOPs rather than a borrowed figure. Achieved
GFLOP/s is set against the fastest fp32 GEMM measured at the same threads in the same run.

The reference loop was checked against the authors' ``train_svhn.py``
(github.com/bpucla/latent-space-EBM-prior, file at HEAD read in session 15): the same
networks, the same two ``autograd.grad`` calls per posterior step, the same ``z.data``
updates; the authors' loop also takes a gradient norm per step and prints every 500
iterations, which is not reproduced. When ``SHORTRUN_AUTHORS_LEBM`` names a local copy of that
file, its own ``_netG``/``_netE`` (built from its ``parse_args`` defaults) are timed in the
reference loop as a third side; nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types

import torch
from flops import count_flops
from lebm_speed import SVHN, reference_iteration, reference_nets
from speed_common import Row, best, fp32_peak, interleave, not_run, spread, threads, timed

from shortrun.hardware import has_native_bf16
from shortrun.models.base import OptimOptions
from shortrun.models.registry import build_model
from shortrun.speed.layout import settle_layouts
from shortrun.train.config import resolve

AUTHORS_ENV = "SHORTRUN_AUTHORS_LEBM"
AUTHORS = "authors' nets"
BF16 = "shortrun bf16"
TARGET = "≥ 1.3× reference, ≥ 60 % of fp32 peak"


def _adam_pair(g, e):
    return (torch.optim.Adam(g.parameters(), 1e-4, betas=(0.5, 0.999)),
            torch.optim.Adam(e.parameters(), 2e-5, betas=(0.5, 0.999)))


def _stub_data_imports() -> list[str]:
    """The script imports torchvision (its data), pygrid (its job runner), its TensorFlow FID
    and matplotlib at module level; the networks need none of them, so stand-ins (any
    attribute is None) are registered where they are missing."""
    stubbed: list[str] = []
    for name in ("torchvision", "torchvision.transforms", "torchvision.utils", "pygrid",
                 "fid_v2_tf_cpu", "matplotlib", "matplotlib.pyplot"):
        try:
            importlib.import_module(name)
        except ImportError:
            stub = types.ModuleType(name)
            stub.__getattr__ = lambda attr: None  # type: ignore[method-assign]
            sys.modules[name] = stub
            stubbed.append(name)
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, stub)
    return stubbed


def authors_nets():
    """The authors' ``_netG``/``_netE`` from the file ``$SHORTRUN_AUTHORS_LEBM`` names, at its
    argument defaults; (None, reason) when unset or not importable."""
    path = os.environ.get(AUTHORS_ENV)
    if not path:
        return None, f"{AUTHORS_ENV} not set (no local copy of the authors' train_svhn.py)"
    spec = importlib.util.spec_from_file_location("authors_train_svhn", path)
    if spec is None or spec.loader is None:
        return None, f"{AUTHORS_ENV}={path} is not a Python file"
    module = importlib.util.module_from_spec(spec)
    argv = sys.argv
    stubbed = _stub_data_imports()
    try:
        spec.loader.exec_module(module)
        sys.argv = [path]
        args = module.parse_args()
        args.nc = getattr(args, "nc", 3)
        return (module._netG(args), module._netE(args)), path
    except Exception as exc:  # its imports (pygrid, torchvision) may be missing here
        return None, f"{AUTHORS_ENV}={path} could not be used ({type(exc).__name__}: {exc})"
    finally:
        sys.argv = argv
        for name in stubbed:  # the stand-ins must not leak into shortrun's own imports
            sys.modules.pop(name, None)


def _peak_probe(peaks: list[tuple[float, str]]):
    """A run of the interleaving that measures the fp32 peak between iterations (charged 0 s),
    appending (GFLOP/s, route) to ``peaks``."""
    def probe() -> float:
        peaks.append(fp32_peak())
        return 0.0
    return probe


def lebm_rows(thread_counts: list[int], repeats: int, batch: int,
              chain_steps: tuple[int, int] = (60, 20)) -> list[Row]:
    """One row per thread count (plus one for the authors' networks), each with GFLOP/s and the
    share of the fp32 peak measured in the same run. ``chain_steps``: (prior K0, posterior K1),
    the official 60 and 20 unless a smoke test shortens them."""
    k0, k1 = chain_steps
    torch.manual_seed(0)
    x = torch.rand(batch, 3, 32, 32) * 2 - 1
    g, e = reference_nets()
    opt_g, opt_e = _adam_pair(g, e)
    cfg = resolve("lebm_svhn", [f"train.batch_size={batch}", f"model.prior_steps={k0}",
                                f"model.post_steps={k1}"])
    model = build_model(cfg, SVHN)
    settle_layouts(model, batch)  # channels_last: auto, as the Trainer settles it
    opts = model.configure_training(OptimOptions.from_train(cfg.train))
    step = [0]

    def ours() -> None:
        model.training_step(x, step[0], opts)
        step[0] += 1

    sides = {"reference": lambda: reference_iteration(g, e, opt_g, opt_e, x, k0=k0, k1=k1),
             "shortrun": ours}
    if has_native_bf16("cpu"):  # what train.precision=bf16 runs: autocast around the step
        model16 = build_model(cfg, SVHN)
        with torch.autocast("cpu", dtype=torch.bfloat16):  # as the Trainer: no timing in bf16
            settle_layouts(model16, batch)
        opts16 = model16.configure_training(OptimOptions.from_train(cfg.train))

        def ours_bf16() -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                model16.training_step(x, step[0], opts16)

        sides[BF16] = ours_bf16
    authors, why = authors_nets()
    if authors is not None:
        ag, ae = authors
        a_opt = _adam_pair(ag, ae)
        sides[AUTHORS] = lambda: reference_iteration(ag, ae, *a_opt, x, k0=k0, k1=k1)
    flops, uncounted = {}, set()
    for name, fn in sides.items():
        fn()  # the first call may time candidate routes (conv layouts): not the iteration's work
        flops[name], missed = count_flops(fn)
        uncounted |= missed
    rows = []
    for n in thread_counts:
        with threads(n):
            peaks: list[tuple[float, str]] = []
            runs = {name: timed(fn) for name, fn in sides.items()}
            runs["peak"] = _peak_probe(peaks)
            times = interleave(runs, repeats)
        top, route = max(peaks)
        label = f"{n} thread{'s' if n > 1 else ''}"
        notes = []
        for name in sides:
            if name == BF16:  # its products are bf16: an fp32 share would mislead
                notes.append(f"{name}: s/iter {spread(times[name])}")
                continue
            rate = flops[name] / best(times[name]) / 1e9
            notes.append(f"{name}: {flops[name] / 1e9:.1f} GFLOP/iter counted on its own graph, "
                         f"{rate:.1f} GFLOP/s = {100 * rate / top:.0f} % of the fp32 peak "
                         f"({top:.0f} GFLOP/s, {route}); s/iter {spread(times[name])}")
        if uncounted:
            notes.append("uncounted product ops (FLOPs are a lower bound): "
                         + ", ".join(sorted(uncounted)))
        size = f"batch {batch}" + ("" if (k0, k1) == (60, 20) else f", K0={k0}, K1={k1}")
        row = Row(f"LEBM lebm_svhn iteration ({size}), {label}", label,
                  best(times["shortrun"]), best(times["reference"]),
                  "official formulation (bench/lebm_speed.py)", target=TARGET, notes=notes,
                  runs={k: times[k] for k in sides})
        rows.append(row)
        if authors is not None:
            rows.append(Row(f"LEBM authors' train_svhn.py networks, {label}", label,
                            best(times["shortrun"]), best(times["authors' nets"]),
                            f"authors' _netG/_netE ({why}) in the reference loop",
                            target=TARGET,
                            notes=[f"authors' nets: s/iter {spread(times[AUTHORS])}"]))
        if BF16 in sides:
            rows.append(Row(f"LEBM lebm_svhn iteration, train.precision=bf16 (opt-in), {label}",
                            label, best(times[BF16]), best(times["reference"]),
                            "official formulation in fp32 (bench/lebm_speed.py)",
                            target="– (other arithmetic: not the 1.3× row)",
                            notes=[f"bf16 products under autocast, fp32 parameters and chains; "
                                   f"s/iter {spread(times[BF16])}; what bf16 does to a trained "
                                   "model: bench/README"]))
    if authors is None:
        rows.append(not_run("LEBM authors' train_svhn.py", "–", why, TARGET))
    return rows
