"""bench/route_gains.py's argument handling and report, without timing anything (the bench
itself is run by hand: bench/README, "Route gains per family (issue 42)")."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        import route_gains
        import route_gains_report
    finally:
        sys.path.remove(str(BENCH))
    return route_gains, route_gains_report


def test_defaults_are_the_three_cheap_parts_at_one_and_two_threads(bench):
    args = bench[0].parse([])
    assert args.parts == ["cd1", "langevin", "generator"]
    assert args.thread_counts == [1, 2]


@pytest.mark.parametrize("argv, message", [
    (["--parts", "cd1,gpu"], "--parts: unknown gpu; use any of cd1, langevin, generator, lebm"),
    (["--parts", ","], "--parts: unknown (empty)"),
    (["--threads", "0"], "--threads 0: give positive integers"),
    (["--threads", "two"], "--threads two: give positive integers"),
    (["--rounds", "0"], "--rounds must be at least 1"),
])
def test_bad_arguments_exit_2_naming_the_fix(bench, capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        bench[0].parse(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_report_takes_gains_round_by_round_and_keeps_one_thread_routes_apart(bench):
    rg, report = bench
    cands = [rg.Cand("plain torch", print), rg.Cand("rbm onednn", print, "rbm"),
             rg.Cand("rbm torch@1", print, "rbm")]
    times = {"plain torch": [2.0, 4.0], "rbm onednn": [1.0, 4.0], "rbm torch@1": [0.5, 0.5]}
    workload = rg.summary("CD-1", 2, cands, times, 1, {})
    assert [c["gains"] for c in workload["cands"]] == [[], [2.0, 1.0], [4.0, 8.0]]
    part = {"date": "d", "commit": "c", "command": "python bench/route_gains.py",
            "load_before": "1", "load_after": "1", "wall_s": 1.0, "quick": False,
            "workloads": [workload]}
    text = report.render({"machine": ["CPU: test"], "parts": {"cd1": part}})
    assert "| rbm onednn | rbm | 2.5 s [1–4] | 1.50× [1.00–2.00] | plain torch |" in text
    assert "| rbm | 2 | 1.50× [1.00–2.00] | CD-1: rbm onednn | 6.00× [4.00–8.00] | " \
           "CD-1: rbm torch@1 |" in text
