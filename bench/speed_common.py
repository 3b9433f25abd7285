"""What every row of ``make bench`` (bench/run_all.py) shares: a row, thread settings for both
torch and the BLAS pools, interleaved best-of-N timing, the machine's GEMM peak measured in the
same run, and the machine's description (CPU model and flags, torch build, load).
"""

from __future__ import annotations

import math
import os
import re
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from shortrun import hardware


@dataclass
class Row:
    """One line of the speed table: shortrun against a reference measured in the same run.

    ``ours``/``ref`` are best-of-N values in ``unit``; ``higher_is_better`` says which way the
    ratio (always "how many times better shortrun is") is taken."""

    name: str
    threads: str
    ours: float | None
    ref: float | None = None
    ref_name: str = "–"
    unit: str = "s"
    higher_is_better: bool = False
    target: str = "–"
    notes: list[str] = field(default_factory=list)
    runs: dict[str, list[float]] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.ours is None or self.ref is None or not self.ours or not self.ref:
            return None
        return self.ours / self.ref if self.higher_is_better else self.ref / self.ours


def not_run(name: str, threads: str, why: str, target: str = "–") -> Row:
    """A row that could not be measured here, with the reason in its notes."""
    return Row(name, threads, None, target=target, notes=[f"not run: {why}"])


@contextmanager
def threads(n: int) -> Iterator[None]:
    """torch's intra-op threads and every BLAS pool the process loaded (NumPy's OpenBLAS,
    which scikit-learn uses) at ``n``, restored afterwards."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(before)


def interleave(runs: dict[str, Callable[[], float]], repeats: int,
               warmup: bool = True) -> dict[str, list[float]]:
    """Seconds of each run, ``repeats`` times, in the order A B A B … so that load from other
    processes hits every side alike. A run returns its own seconds (so set-up it must not be
    charged for stays outside its timer). One untimed warm-up of each first. Every run starts
    at the thread count the caller set: a run that changes it (the Trainer may drop to one
    thread for small products, and shortrun caps NumPy's BLAS pool at torch's count) does not
    pass its choice on to the next side."""
    from threadpoolctl import threadpool_limits

    n = torch.get_num_threads()

    def start(fn: Callable[[], float]) -> float:
        torch.set_num_threads(n)
        threadpool_limits(limits=n, user_api="blas")
        return fn()

    if warmup:
        for fn in runs.values():
            start(fn)
    out: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            out[name].append(start(fn))
    return out


def timed(fn: Callable[[], object]) -> Callable[[], float]:
    """``fn`` turned into a run that returns its wall seconds."""
    def run() -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t
    return run


def best(values: list[float]) -> float:
    return min(values) if values else math.nan


def spread(values: list[float]) -> str:
    """"best / median of N" for a row's notes."""
    return (f"best {min(values):.3g} / median {statistics.median(values):.3g} "
            f"of {len(values)}")


def fp32_peak() -> tuple[float, str]:
    """The fastest fp32 GEMM route at the current threads (``shortrun info``'s 1024³ probe:
    torch.mm, oneDNN, NumPy): GFLOP/s and the route's name."""
    from shortrun.info import gemm_peaks

    peaks = {k: v for k, v in gemm_peaks().items() if "bf16" not in k}
    name = max(peaks, key=peaks.__getitem__)
    return peaks[name], name


def vector_tier() -> str:
    """The widest vector unit GEMM kernels can use here: ``amx``, ``avx512``, ``avx2`` or
    ``novec``."""
    flags = hardware.cpu_flags()
    for tier, flag in (("amx", "amx_tile"), ("avx512", "avx512f"), ("avx2", "avx2")):
        if flag in flags:
            return tier
    return "novec"


def cpu_slug() -> str:
    """The CPU model, vector tier and /proc/cpuinfo family and model as a file name: ``AMD
    EPYC`` with AVX-512, cpu family 26, model 2 -> ``amd-epyc-avx512-f26m2``. A virtual machine
    names every EPYC alike; the tier and the family/model keep apart machines whose speeds
    differ (the AVX-512 EPYCs of sessions 16, 19 and 31 differ twofold in GEMM peak), so one
    machine's run never overwrites another's file."""
    slug = re.sub(r"[^a-z0-9]+", "-", hardware.cpu_model().lower()).strip("-")
    fm = hardware.cpu_family_model()
    where = f"-f{fm[0]}m{fm[1]}" if fm else ""
    return f"{slug or 'unknown-cpu'}-{vector_tier()}{where}"


def machine_lines() -> list[str]:
    """CPU model, the flags GEMM kernels dispatch on (present and absent), cores, torch and
    BLAS builds: the header every results file starts with."""
    from shortrun.info import numpy_blas, torch_build

    flags = hardware.cpu_flags()
    have = [f for f in hardware.RELEVANT_FLAGS if f in flags]
    lack = [f for f in hardware.RELEVANT_FLAGS if f not in flags]
    build = torch_build()
    sig = hardware.cpu_signature()
    return [f"CPU: {hardware.cpu_model()}" + (f" ({sig})" if sig else ""),
            f"CPU flags: {' '.join(have) or 'none of interest'}"
            + (f" (absent: {' '.join(lack)})" if lack else ""),
            f"logical CPUs: {os.cpu_count()}; torch default threads: "
            f"{torch.get_num_threads()}",
            f"torch: {torch.__version__}; BLAS {build['blas']}; oneDNN {build['onednn']}; "
            f"CPU capability {build['capability']}",
            f"NumPy BLAS: {numpy_blas()}",
            "bf16 native: " + ("yes" if hardware.has_native_bf16("cpu")
                               else f"no (needs {hardware.bf16_missing('cpu')})")]


def load_average() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
