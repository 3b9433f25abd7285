"""``shortrun info``: what this machine and build do, so a speed claim can say where it ran.

Prints the CPU model and the flags the GEMM kernels dispatch on, torch's threads, torch's and
NumPy's BLAS builds, a measured float32 GEMM peak (a 1024³ product through ``torch.mm`` and
NumPy, best of a few; about a second), whether bf16 is native (and its ``torch.mm`` peak where
it is), and the route each family takes here (rbm_step, conv, deconv).
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Callable

import numpy as np
import torch

from shortrun import hardware
from shortrun.speed import cache
from shortrun.speed import engine as routes
from shortrun.speed.rbm_numpy import match_blas_threads

PEAK_N = 1024
# the binary RBM's whole update (rbm_step): (label, visible, hidden, batch, options)
RBM_STEP_SHAPES = (("rbm_digits, PCD-1 centered 64×20, batch 50", 64, 20, 50,
                    dict(learning="pcd", centering=True, momentum=0.5, n_chains=100)),
                   ("MNIST CD-1, 784×500, batch 100", 784, 500, 100, dict(learning="cd")))
# the LEBM generator's chain step: (label, generator, nz, ngf, batch)
CONV_SHAPES = (("lebm_svhn, batch 100", "svhn32", 100, 64, 100),)
# the generators whose first and last layers take a deconv route: as CONV_SHAPES
DECONV_SHAPES = (*CONV_SHAPES, ("lebm_mnist_anomaly, batch 100", "mnist28", 32, 16, 100))


def torch_build() -> dict[str, str]:
    """BLAS, oneDNN and CPU capability from ``torch.__config__.show()`` (minimal parsing: the
    text is for humans; a line that is not found is reported as such)."""
    text = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", text)
    mkl = re.search(r"^\s*- (Intel\(R\) oneAPI Math Kernel Library Version [^\n]*?)(?: for |$)",
                    text, re.M)
    dnn = re.search(r"^\s*- (?:Intel\(R\) MKL-DNN|oneDNN) (v[\d.]+)", text, re.M)
    cap = re.search(r"CPU capability usage: (\w+)", text)
    return {"blas": (blas.group(1) if blas else "not reported")
            + (f" ({mkl.group(1)})" if mkl else ""),
            "onednn": dnn.group(1) if dnn else "not reported",
            "capability": cap.group(1) if cap else "not reported"}


def numpy_blas() -> str:
    """NumPy's BLAS library, version, kernel architecture and thread count (threadpoolctl)."""
    from threadpoolctl import threadpool_info

    libs = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"
            and "numpy" in lib.get("filepath", "")] or \
        [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    if not libs:
        return "not found by threadpoolctl"
    lib = libs[0]
    arch = f", {lib['architecture']} kernels" if lib.get("architecture") else ""
    return (f"{lib.get('internal_api')} {lib.get('version')}{arch}, "
            f"{lib.get('num_threads')} threads")


def _gflops(fn: Callable[[], object], n: int) -> float:
    return 2 * n ** 3 / routes.measure("peak", fn) / 1e9


def gemm_peaks(n: int | None = None) -> dict[str, float]:
    """GFLOP/s of an ``n``³ (default :data:`PEAK_N`) float32 product by torch and NumPy, and
    bf16 by torch where bf16 is native."""
    n = n or PEAK_N
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    out = {"torch.mm": _gflops(lambda: torch.mm(a, b), n)}
    an, bn = a.numpy(), b.numpy()
    out["NumPy"] = _gflops(lambda: np.matmul(an, bn), n)
    if hardware.has_native_bf16("cpu"):
        a16, b16 = a.bfloat16(), b.bfloat16()
        out["torch.mm bf16"] = _gflops(lambda: torch.mm(a16, b16), n)
    return out


def _how(family: str, key: str) -> str:
    entry = routes.remembered().get(key)
    if routes.pinned_route(family):
        return "pinned"
    if entry and entry.get("rule"):
        return "size rule"
    if entry and "us" in entry:
        return "measured " + ", ".join(f"{k} {t:g} µs" for k, t in entry["us"].items())
    return "the only candidate"


def rbm_step_routes() -> list[str]:
    """Whether the binary RBM's update runs as torch or NumPy calls, for each shape."""
    from shortrun.data.base import DataInfo
    from shortrun.models.rbm import BernoulliRBM
    from shortrun.speed.rbm_step import FAMILY, RBM_STEP, step_route

    lines = []
    for label, n_vis, n_hid, batch, options in RBM_STEP_SHAPES:
        with torch.random.fork_rng(devices=[]):
            model = BernoulliRBM(n_hid, info=DataInfo((n_vis,), "binary"), **options)
            v = (torch.rand(batch, n_vis) < 0.3).float()
        opts = model.fast_step_options()
        chains = model.source.chains if opts.learning == "pcd" else None
        tensors = (model.W, model.b, model.c, model.mu, model.lam, chains)
        name = step_route(tensors, v, opts).name
        lines.append(f"route rbm_step ({label}): {name} "
                     f"({_how(FAMILY, RBM_STEP.key(tensors, v, opts))})")
    return lines


def conv_routes() -> list[str]:
    """The layout the LEBM generator settles on (``model.channels_last: auto``) per shape."""
    from shortrun.models.lebm_nets import Generator
    from shortrun.speed import layout as conv

    lines = []
    for label, kind, nz, ngf, batch in CONV_SHAPES:
        with torch.random.fork_rng(devices=[]):
            g = Generator(kind, nz, ngf, "auto")
        conv.settle_layouts(g, batch)
        key = conv.LAYOUT.key(g.net, torch.zeros(batch, nz, 1, 1), f"{kind}-nz{nz}-ngf{ngf}")
        lines.append(f"route conv ({label}): {g.layout} ({_how(conv.FAMILY, key or '')})")
    return lines


def deconv_routes() -> list[str]:
    """The route of the LEBM generators' first and last layers (``deconv`` family), after the
    layout settled: one generator forward plus the latent's gradient, as a chain step runs."""
    from shortrun.models.lebm_nets import Generator
    from shortrun.speed import deconv as fold_routes
    from shortrun.speed.layout import settle_layouts

    lines = []
    for label, kind, nz, ngf, batch in DECONV_SHAPES:
        with torch.random.fork_rng(devices=[]):
            g = Generator(kind, nz, ngf, "auto")
        settle_layouts(g, batch)
        z = torch.randn(batch, nz, generator=torch.Generator().manual_seed(0))
        with torch.enable_grad():
            z.requires_grad_(True)
            torch.autograd.grad(g(z).sum(), z)
        for layer in (m for m in g.modules() if isinstance(m, fold_routes.RoutedTransposedConv)):
            which = "first" if isinstance(layer, fold_routes.LatentProjection) else "last"
            for chosen in layer.__dict__.get("_routes", {}).values():
                how = _how(fold_routes.FAMILY, chosen.key) if chosen.key else (
                    "pinned" if routes.pinned_route(fold_routes.FAMILY, fold_routes.ROUTES)
                    else "the only candidate")
                lines.append(f"route deconv ({label}, {which} layer {layer.in_channels}→"
                             f"{layer.out_channels}): {chosen.name} ({how})")
    return lines


def info_lines() -> list[str]:
    """Everything ``shortrun info`` prints, one ``name: value`` line each."""
    from shortrun.version import __version__

    match_blas_threads()  # NumPy's pool at torch's count, as in training
    n = torch.get_num_threads()
    threads = f"{n} thread{'s' if n != 1 else ''}"
    flags = hardware.cpu_flags()
    have = [f for f in hardware.RELEVANT_FLAGS if f in flags]
    lack = [f for f in hardware.RELEVANT_FLAGS if f not in flags]
    build = torch_build()
    missing = hardware.bf16_missing("cpu")
    peaks = gemm_peaks()
    signature = hardware.cpu_signature()
    lines = [
        f"shortrun: {__version__} (Python {platform.python_version()}, NumPy {np.__version__})",
        f"cpu: {hardware.cpu_model()} ({os.cpu_count()} logical CPUs"
        + (f"; {signature})" if signature else ")"),
        f"cpu flags: {' '.join(have) or 'none of interest'}"
        + (f" (absent: {' '.join(lack)})" if lack else ""),
        f"torch: {torch.__version__}, {threads} "
        f"(interop {torch.get_num_interop_threads()})",
        f"torch BLAS: {build['blas']}",
        f"torch oneDNN: {build['onednn']} (enabled: {torch.backends.mkldnn.enabled}), "
        f"CPU capability {build['capability']}",
        f"NumPy BLAS: {numpy_blas()}",
        "bf16 native: " + ("yes" if missing is None else f"no (needs {missing})"),
        f"fp32 GEMM peak ({PEAK_N}³, {threads}): "
        + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in peaks.items() if "bf16" not in k),
    ]
    if "torch.mm bf16" in peaks:
        lines.append(f"bf16 GEMM peak ({PEAK_N}³, {threads}): "
                     f"torch.mm {peaks['torch.mm bf16']:.0f} GFLOP/s")
    lines += rbm_step_routes() + conv_routes() + deconv_routes()
    pins = ", ".join(f"SHORTRUN_ROUTE_{f.upper()}={'|'.join(r)}"
                     for f, r in routes.FAMILIES.items())
    lines += [f"route cache: {cache.cache_path()} (safe to delete; {pins} pin one family)"]
    return lines
