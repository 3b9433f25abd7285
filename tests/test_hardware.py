"""``shortrun.hardware``: CPU model and flags from /proc/cpuinfo, and whether bf16 is native."""

from __future__ import annotations

import pytest
import torch

from shortrun import hardware
from shortrun.errors import ConfigError

CPUINFO = """processor\t: 0
cpu family\t: 6
model\t\t: 85
model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz
stepping\t: 7
flags\t\t: fpu sse2 avx2 fma avx512f avx512_vnni{extra}

processor\t: 1
model name\t: another core
"""


@pytest.fixture
def fake_cpu(tmp_path, monkeypatch):
    """Point the reader at a written cpuinfo; ``fake_cpu(" avx512_bf16")`` adds flags."""
    def write(extra: str = "") -> None:
        path = tmp_path / "cpuinfo"
        path.write_text(CPUINFO.format(extra=extra))
        monkeypatch.setattr(hardware, "CPUINFO", path)
        hardware._cpuinfo_fields.cache_clear()

    yield write
    hardware._cpuinfo_fields.cache_clear()


def test_model_and_flags_come_from_the_first_processor(fake_cpu):
    fake_cpu(" avx512_bf16")
    assert hardware.cpu_model() == "Intel(R) Xeon(R) CPU @ 2.20GHz"
    assert {"avx2", "avx512f", "avx512_bf16"} <= hardware.cpu_flags()


def test_the_machine_names_its_vector_units_so_avx2_and_avx512_cpus_differ(fake_cpu):
    fake_cpu()
    with_512 = hardware.cpu_machine()
    assert with_512 == "Intel(R) Xeon(R) CPU @ 2.20GHz [avx2 fma avx512f avx512_vnni]"
    hardware.CPUINFO.write_text(CPUINFO.replace(" avx512f avx512_vnni{extra}", ""))
    hardware._cpuinfo_fields.cache_clear()
    assert hardware.cpu_machine() == "Intel(R) Xeon(R) CPU @ 2.20GHz [avx2 fma]"


@pytest.mark.parametrize("flag", ["avx512_bf16", "amx_bf16"])
def test_either_bf16_flag_makes_bf16_native(fake_cpu, flag):
    fake_cpu(f" amx_tile {flag}")
    assert hardware.bf16_missing("cpu") is None and hardware.has_native_bf16()
    hardware.require_native_bf16(torch.device("cpu"))  # no error


def test_without_the_flags_bf16_is_refused_naming_the_feature_and_the_fix(fake_cpu):
    fake_cpu()
    with pytest.raises(ConfigError) as err:
        hardware.require_native_bf16(torch.device("cpu"))
    msg = str(err.value)
    assert "\n" not in msg
    assert msg == ("train.precision=bf16 needs the CPU's AVX512-BF16 or AMX-BF16 instructions "
                   "(Intel(R) Xeon(R) CPU @ 2.20GHz has neither); without it bf16 is emulated "
                   "and slower than fp32; use train.precision=fp32")


def test_unreadable_cpuinfo_means_no_flags(tmp_path, monkeypatch):
    monkeypatch.setattr(hardware, "CPUINFO", tmp_path / "missing")
    hardware._cpuinfo_fields.cache_clear()
    try:
        assert hardware.cpu_flags() == frozenset() and hardware.cpu_model()
        assert not hardware.has_native_bf16("cpu")
    finally:
        hardware._cpuinfo_fields.cache_clear()


@pytest.mark.parametrize("supported", [True, False])
def test_cuda_asks_torch(monkeypatch, supported):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: supported)
    assert hardware.has_native_bf16("cuda") is supported
    if not supported:
        assert "torch.cuda.is_bf16_supported() is False" in hardware.bf16_missing("cuda")


def test_the_signature_tells_apart_cpus_with_one_model_name(fake_cpu):
    fake_cpu()
    assert hardware.cpu_signature() == "cpu family 6, model 85, stepping 7"


@pytest.mark.parametrize("read", ["cpu_signature", "cpu_family_model"])
def test_nothing_where_cpuinfo_is_unreadable(read, tmp_path, monkeypatch):
    monkeypatch.setattr(hardware, "CPUINFO", tmp_path / "absent")
    hardware._cpuinfo_fields.cache_clear()
    try:
        assert getattr(hardware, read)() is None
    finally:
        hardware._cpuinfo_fields.cache_clear()


def test_family_and_model_as_numbers_for_a_results_file_name(fake_cpu):
    fake_cpu()
    assert hardware.cpu_family_model() == (6, 85)
