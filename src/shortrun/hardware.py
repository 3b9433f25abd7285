"""What this machine can do natively: the CPU's model and flags, and whether bf16 is native.

bf16 autocast on a CPU without AVX512-BF16 or AMX emulates every bf16 product in float32 plus
conversions: on an Intel Xeon without them an RBM epoch ran nearly three times slower than in
fp32. So ``train.precision=bf16`` is refused there (:func:`require_native_bf16`), and the bf16
tests are skipped with :func:`bf16_missing` as the reason.

Flags are read from ``/proc/cpuinfo`` (Linux); elsewhere the CPU model comes from
:mod:`platform` and the flag set is empty, so bf16 counts as not native — refusing is safe,
``train.precision=fp32`` always works.
"""

from __future__ import annotations

import platform
from functools import lru_cache
from pathlib import Path

import torch

from shortrun.errors import ConfigError

CPUINFO = Path("/proc/cpuinfo")
# the flags `shortrun info` prints: the vector units the GEMM kernels (MKL, oneDNN, OpenBLAS)
# dispatch on, and the two bf16 ones
RELEVANT_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile",
                  "amx_bf16", "amx_int8")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@lru_cache(maxsize=1)
def _cpuinfo_fields() -> dict[str, str]:
    """The first processor's ``key: value`` lines of /proc/cpuinfo ({} when unreadable)."""
    try:
        text = CPUINFO.read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor is enough: the flags are the same on every core
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model() -> str:
    """The CPU's model name (``model name`` in /proc/cpuinfo), else :func:`platform.processor`."""
    return (_cpuinfo_fields().get("model name") or platform.processor()
            or platform.machine() or "unknown CPU")


def cpu_machine() -> str:
    """The CPU model and the vector units it has among :data:`RELEVANT_FLAGS`, e.g.
    ``AMD EPYC [avx2 fma]``: a virtual machine may report only ``AMD EPYC`` for CPUs with and
    without AVX-512, whose GEMM kernels, fastest routes and float results differ, so the
    route cache and the recorded fingerprints key on this rather than on the model alone."""
    flags = cpu_flags()
    units = " ".join(f for f in RELEVANT_FLAGS if f in flags) or "no vector flags"
    return f"{cpu_model()} [{units}]"


def cpu_signature() -> str | None:
    """``cpu family F, model M, stepping S`` from /proc/cpuinfo (None where it has none).

    Printed beside :func:`cpu_machine` wherever a measurement names its machine: two virtual
    machines that both report ``AMD EPYC`` with the same AVX-512 flags differed twofold in
    fp32 GEMM peak, and only these numbers told them apart. Not part of the route-cache or
    fingerprint keys, which must stay stable."""
    f = _cpuinfo_fields()
    parts = [f"{name} {f[key]}" for key, name in (("cpu family", "cpu family"),
                                                   ("model", "model"), ("stepping", "stepping"))
             if f.get(key)]
    return ", ".join(parts) or None


def cpu_family_model() -> tuple[int, int] | None:
    """``(cpu family, model)`` from /proc/cpuinfo as numbers, or None where it has none (the
    short form of :func:`cpu_signature`, e.g. for a results file name)."""
    f = _cpuinfo_fields()
    family, model = f.get("cpu family", ""), f.get("model", "")
    return (int(family), int(model)) if family.isdigit() and model.isdigit() else None


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``flags`` in /proc/cpuinfo); empty where they cannot be read."""
    return frozenset(_cpuinfo_fields().get("flags", "").split())


def bf16_missing(device: torch.device | str = "cpu") -> str | None:
    """Why bf16 is not native on ``device`` (the missing feature, one phrase), or None."""
    device = torch.device(device)
    if device.type == "cuda":
        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return None
        return "a CUDA GPU with bf16 support (torch.cuda.is_bf16_supported() is False)"
    if device.type == "cpu":
        if cpu_flags() & set(BF16_FLAGS):
            return None
        return f"the CPU's AVX512-BF16 or AMX-BF16 instructions ({cpu_model()} has neither)"
    return f"native bf16 on device type {device.type!r} (only CPU and CUDA are checked)"


def has_native_bf16(device: torch.device | str = "cpu") -> bool:
    """Whether bf16 products run in hardware on ``device``."""
    return bf16_missing(device) is None


def require_native_bf16(device: torch.device | str) -> None:
    """Raise a one-line :class:`ConfigError` unless bf16 is native on ``device``."""
    missing = bf16_missing(device)
    if missing is not None:
        raise ConfigError(f"train.precision=bf16 needs {missing}; without it bf16 is emulated "
                          "and slower than fp32; use train.precision=fp32")
