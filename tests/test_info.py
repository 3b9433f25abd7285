"""``shortrun info``: every line is there (the numbers are the machine's, not checked)."""

from __future__ import annotations

import json
import re

import pytest
import torch

from shortrun import info
from shortrun.cli import main
from shortrun.speed import cache
from shortrun.speed import engine as routes

EXPECTED = [
    r"shortrun: \S+ \(Python \S+, NumPy \S+\)",
    r"cpu: .+ \(\d+ logical CPUs(; cpu family \d+, model \d+, stepping \d+)?\)",
    r"cpu flags: .+",
    r"torch: \S+, 1 thread \(interop \d+\)",
    r"torch BLAS: .+",
    r"torch oneDNN: .+ \(enabled: (True|False)\), CPU capability \w+",
    r"NumPy BLAS: .+",
    r"bf16 native: (yes|no \(needs .+\))",
    r"fp32 GEMM peak \(64³, 1 thread\): torch\.mm \d+ GFLOP/s, .*NumPy \d+ GFLOP/s",
    r"route rbm_step \(rbm_digits, PCD-1 centered 64×20, batch 50\): (torch|numpy) \(.+\)",
    r"route rbm_step \(MNIST CD-1, 784×500, batch 100\): (torch|numpy) \(.+\)",
    r"route conv \(lebm_svhn, batch 100\): (nchw|nhwc) \(.+\)",
    r"route cache: .+routes\.json .+",
]


def test_info_prints_every_line(capsys, monkeypatch):
    monkeypatch.setattr(info, "PEAK_N", 64)  # the lines, not the peak: keep it short
    assert main(["info", "--threads", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for pattern in EXPECTED:
        assert any(re.fullmatch(pattern, line) for line in lines), (pattern, lines)
    assert not any(line.startswith("route mlp") or "SHORTRUN_ROUTE_MLP" in line
                   for line in lines)  # the family was removed
    for family in ("rbm_step", "conv"):
        assert any(line.endswith("(pinned)") for line in lines
                   if line.startswith(f"route {family} "))


def test_the_peak_is_measured_on_each_route():
    peaks = info.gemm_peaks(64)
    assert {"torch.mm", "NumPy"} <= set(peaks) and all(v > 0 for v in peaks.values())


def test_the_rbm_step_line_shows_the_size_rules_choice(monkeypatch):
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("rbm_step was timed"))
    assert info.rbm_step_routes() == [
        "route rbm_step (rbm_digits, PCD-1 centered 64×20, batch 50): numpy (size rule)",
        "route rbm_step (MNIST CD-1, 784×500, batch 100): numpy (size rule)"]


def test_the_conv_line_shows_the_measured_layouts(monkeypatch):
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.delenv("SHORTRUN_ROUTE_CONV")
    monkeypatch.setattr(info, "CONV_SHAPES", (("tiny", "mnist28", 4, 4, 3),))
    monkeypatch.setattr(routes, "measure", lambda name, fn: 2.0 if name == "nhwc" else 1.0)
    assert info.conv_routes() == ["route conv (tiny): nchw (measured nchw 1e+06 µs, "
                                  "nhwc 2e+06 µs)"]


def test_torch_build_is_parsed_minimally(monkeypatch):
    monkeypatch.setattr(torch.__config__, "show", lambda: (
        "  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 1 for Intel(R) 64\n"
        "  - Intel(R) MKL-DNN v3.12.0 (Git Hash abc)\n  - CPU capability usage: AVX2\n"
        "  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release"))
    assert info.torch_build() == {
        "blas": "mkl (Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 1)",
        "onednn": "v3.12.0", "capability": "AVX2"}
    monkeypatch.setattr(torch.__config__, "show", lambda: "something else")
    assert set(info.torch_build().values()) == {"not reported"}


def test_retime_drops_this_machines_cached_choices_first(capsys, monkeypatch):
    monkeypatch.setattr(info, "PEAK_N", 64)
    path = cache.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({cache.machine_key(): {"a": {"name": "torch", "us": {}},
                                                       "b": {"name": "numpy", "us": {}}}}))
    assert main(["info", "--threads", "1", "--retime"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "route cache: dropped this machine's 2 cached choices; every route is " \
        "timed afresh"
    assert not {"a", "b"} & set(json.loads(path.read_text()).get(cache.machine_key(), {}))


def test_info_refuses_zero_threads(capsys):
    assert main(["info", "--threads", "0"]) == 2
    assert "--threads 0: use a count of 1 or more" in capsys.readouterr().err


def test_the_deconv_lines_show_each_layers_measured_route(monkeypatch):
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.delenv("SHORTRUN_ROUTE_DECONV", raising=False)
    monkeypatch.setenv("SHORTRUN_ROUTE_CONV", "nhwc")
    monkeypatch.setattr(info, "DECONV_SHAPES", (("tiny", "mnist28", 4, 4, 3),))
    monkeypatch.setattr(routes, "measure", lambda name, fn: 2.0 if name == "conv" else 1.0)
    assert info.deconv_routes() == [
        "route deconv (tiny, first layer 4→16): gemm (measured conv 2e+06 µs, gemm 1e+06 µs)",
        "route deconv (tiny, last layer 8→1): fold (measured conv 2e+06 µs, fold 1e+06 µs)"]
    monkeypatch.setenv("SHORTRUN_ROUTE_DECONV", "conv")
    assert {line.split(": ")[1] for line in info.deconv_routes()} == {"conv (pinned)"}
